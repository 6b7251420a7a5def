//! SPEC §25's compatibility corpus: real MCP servers from npm and PyPI
//! (pinned in `xy_testbins::corpus`), each installed the README's way
//! (`xyctl add --npm|--pypi … --yes`, `xyctl add --stdio -- …` from a
//! project, `xyctl import claude-desktop [--pin]`) in a private HOME with
//! private XDG dirs, then called through the official Python SDK client
//! twice, side by side: through xy with the defaults (the gateway, and the
//! server's own port for its listing) and directly against the same
//! install (the command, arguments and env of the server's file, no xy).
//! The target: every server that works directly works through xy, same
//! tools, same calls, same results.
//!
//! One test per server (`cargo test -p xy-cli --test compat -- compat::memory`);
//! each failure names the server, the column that failed and xy's `why`.
//! The packages come from the interop cache (`.ci/run` fills it); a missing
//! `npm`/`python3` or registry is a loud skip, as is a missing `chromium`
//! for the two browser rows. `docs/compatibility.md` holds the table.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Home;
use xy_testbins::corpus::{self, Corpus};
use xy_testbins::interop::{Interop, Skip};
use xy_testbins::wait::scaled;

/// How long a server may take from `add` to its first listing through xy
/// (a browser driver's first start on a loaded 2-core machine included).
const READY: Duration = Duration::from_secs(90);

/// How a row's server gets installed.
enum Install {
    /// `xyctl add <name> --npm <pkg>@<pin> --yes [-- args]`.
    Npm(&'static str, Vec<String>),
    /// `xyctl add <name> --pypi <pkg>==<pin> --yes [-- args]`.
    Pypi(&'static str, Vec<String>),
    /// `xyctl add <name> --stdio -- <command…>` run in `dir`.
    Stdio(PathBuf, Vec<String>),
    /// `xyctl import claude-desktop [--pin --yes]` of one entry
    /// `{command, args}` named after the row.
    Import {
        command: &'static str,
        args: Vec<String>,
        pin: bool,
    },
}

/// A registry a row reaches: its install (npm's metadata, PyPI's JSON API
/// and files, a wheel's npm dependencies, D290) or its server at start
/// (`npx`, `uvx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    Npm,
    Pypi,
}

impl Install {
    fn needs(&self) -> Vec<Net> {
        match self {
            Install::Npm(..) => vec![Net::Npm],
            Install::Pypi(..) => vec![Net::Pypi, Net::Npm],
            Install::Stdio(..) => Vec::new(),
            Install::Import { command, .. } if *command == "uvx" => vec![Net::Pypi],
            Install::Import { .. } => vec![Net::Npm],
        }
    }
}

/// The first of `needs` this machine cannot reach now, as a sentence;
/// asked only after a row failed, so a row that works from the cache
/// offline still runs.
fn unreachable(needs: &[Net]) -> Option<String> {
    for net in needs {
        let (what, mut probe) = match net {
            Net::Npm => {
                let mut c = Command::new("npm");
                c.args(["ping", "--fetch-retries=0", "--fetch-timeout=20000"]);
                ("the npm registry (`npm ping`)", c)
            }
            Net::Pypi => {
                let mut c = Command::new("python3");
                c.args([
                    "-c",
                    "import urllib.request; urllib.request.urlopen('https://pypi.org/pypi/pip/json', timeout=20)",
                ]);
                ("PyPI's JSON API", c)
            }
        };
        let ok = probe
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Some(format!("{what} cannot be reached from this machine now"));
        }
    }
    None
}

/// One server of the corpus.
struct Row {
    install: Install,
    /// `[tool, arguments, masks?]` entries (see `corpus_client.py`); empty:
    /// listing only (a server whose tools need a service we do not run).
    calls: Value,
}

/// A private xy world for one row.
struct World {
    name: &'static str,
    h: Home,
    corpus: Corpus,
    gateway: u16,
    /// Helpers a row started (the fetch row's page server), killed on drop.
    children: std::cell::RefCell<Vec<std::process::Child>>,
}

impl Drop for World {
    fn drop(&mut self) {
        for c in self.children.get_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // `Home` stops the daemon too; this one spawns nothing.
        let _ = self.xyctl(&["daemon", "stop"], None, true);
    }
}

impl World {
    fn new(name: &'static str, corpus: Corpus) -> World {
        // A short root: Chromium's `SingletonSocket` lives in the private
        // TMPDIR (`<state>/xy/sandbox/<name>/tmp/org.chromium.Chromium.XXXXXX/`),
        // and a Unix socket path has at most 107 bytes; a user's
        // `~/.local/state` is short enough, `/tmp/xycompat-<row>-XXXXXX/state`
        // was not (`Socket path too long`).
        let h = Home::with_xdg("xyc");
        let gateway = xy_testbins::locate::free_port();
        std::fs::write(
            h.config_dir().parent().unwrap().join("xy.kdl"),
            format!("gateway {{ port {gateway}; }}\n"),
        )
        .unwrap();
        World {
            name,
            h,
            corpus,
            gateway,
            children: Default::default(),
        }
    }

    fn home(&self) -> &Path {
        self.h.home()
    }

    /// The environment a user's shell (and so `xyctl`, `xyd` and a client
    /// launching a server directly) has: the private HOME and XDG dirs,
    /// `uvx` on PATH, the machine's certificates and proxies.
    fn base_env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .h
            .env()
            .into_iter()
            .filter(|(k, _)| k != "PATH")
            .collect();
        let path = format!(
            "{}:{}",
            self.corpus.uv_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        env.push(("PATH".into(), path));
        let home = self.home().display().to_string();
        env.push(("XDG_DATA_HOME".into(), format!("{home}/data")));
        env.push(("XDG_CACHE_HOME".into(), format!("{home}/cache")));
        for (k, v) in std::env::vars() {
            let lower = k.to_ascii_lowercase();
            if lower.ends_with("_proxy")
                || matches!(
                    k.as_str(),
                    "PIP_CERT"
                        | "NODE_EXTRA_CA_CERTS"
                        | "SSL_CERT_FILE"
                        | "SSL_CERT_DIR"
                        | "REQUESTS_CA_BUNDLE"
                        | "CURL_CA_BUNDLE"
                )
            {
                env.push((k, v));
            }
        }
        env
    }

    /// `xyctl <args>` in this world; `install` adds the corpus's offline
    /// package sources (for `add`/`import`, never for the daemon).
    fn xyctl(&self, args: &[&str], dir: Option<&Path>, install: bool) -> (bool, String) {
        let mut c = Command::new(support::XYCTL);
        c.args(args)
            .env_clear()
            .envs(self.base_env())
            .stdin(Stdio::null());
        if install {
            c.envs(self.corpus.install_env());
            // Only `add` and `import` may spawn nothing: the daemon must
            // not inherit the install settings.
            c.env("XY_NO_SPAWN", "1");
        }
        if let Some(d) = dir {
            c.current_dir(d);
        }
        let o = c.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.success(), text)
    }

    /// [`World::xyctl`] for an install, reading its output as it comes:
    /// also how long `add`/`import` waited for the server's first listing
    /// (from its last line with words before the outcome line, `…
    /// running, N tools`, to that line: the reload and the wait, nothing
    /// of the install).
    fn xyctl_install(&self, args: &[&str], dir: Option<&Path>) -> (bool, String, Option<Duration>) {
        use std::io::BufRead;
        let mut c = Command::new(support::XYCTL);
        c.args(args)
            .env_clear()
            .envs(self.base_env())
            .envs(self.corpus.install_env())
            .env("XY_NO_SPAWN", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(d) = dir {
            c.current_dir(d);
        }
        let mut child = c.spawn().unwrap();
        let lines =
            std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Instant, bool, String)>::new()));
        let read = |pipe: Box<dyn std::io::Read + Send>, stdout: bool| {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push((Instant::now(), stdout, line));
                }
            })
        };
        let a = read(Box::new(child.stdout.take().unwrap()), true);
        let b = read(Box::new(child.stderr.take().unwrap()), false);
        let status = child.wait().unwrap();
        let _ = (a.join(), b.join());
        let mut lines = std::mem::take(&mut *lines.lock().unwrap());
        lines.sort_by_key(|(t, _, _)| *t);
        let outcome = lines
            .iter()
            .position(|(_, out, l)| *out && l.contains("running, ") && l.contains(" tool"));
        // `import` prints an empty line once the wait is over: the wait
        // began at the last line with words.
        let waited = outcome.and_then(|i| {
            let began = lines[..i]
                .iter()
                .rev()
                .find(|(_, _, l)| !l.trim().is_empty())?;
            Some(lines[i].0 - began.0)
        });
        let text: Vec<&str> = lines.iter().map(|(_, _, l)| l.as_str()).collect();
        (status.success(), text.join("\n") + "\n", waited)
    }

    /// The daemon's list entry for `server`.
    fn entry(&self, server: &str) -> Option<Value> {
        let (ok, out) = self.xyctl(&["list", "--json"], None, false);
        if !ok {
            return None;
        }
        let list: Value = serde_json::from_str(out.trim()).ok()?;
        list.as_array()?
            .iter()
            .find(|e| e["name"] == server)
            .cloned()
    }

    /// Waits until `server` listed its tools through xy, or is plainly not
    /// going to (restarting, failed). `Err` says what happened.
    fn ready(&self, server: &str) -> Result<Value, String> {
        let deadline = Instant::now() + scaled(READY);
        let mut last = Value::Null;
        while Instant::now() < deadline {
            if let Some(e) = self.entry(server) {
                if e["state"] == "running" && e["tool_count"].is_u64() {
                    return Ok(e);
                }
                if e["restart_count"].as_u64().unwrap_or(0) >= 2 || e["state"] == "failed" {
                    return Err(format!("not running: {e}"));
                }
                last = e;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(format!("no listing within {READY:?}: {last}"))
    }

    /// `xyctl status <server>` and the error lines of its log, for
    /// failure messages (a traceback's cause is often above `status`'s
    /// last lines).
    fn status(&self, server: &str) -> String {
        let status = self.xyctl(&["status", server], None, false).1;
        let logs = self.xyctl(&["logs", server, "-n", "400"], None, false).1;
        let marks = ["error", "denied", "eacces", "eperm", "permission", "failed"];
        let errors: Vec<&str> = logs
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                marks.iter().any(|m| l.contains(m))
            })
            .take(20)
            .collect();
        format!("{status}\nerror lines of its log:\n{}", errors.join("\n"))
    }

    /// The SDK client against `target` (a URL, or a command line run with
    /// `env` in `cwd`); its JSON line, or `{error}`.
    fn client(&self, calls: &Value, target: Target<'_>) -> Value {
        let mut c = Command::new(&self.corpus.python);
        c.arg(&self.corpus.client_script)
            .arg("--calls")
            .arg(calls.to_string())
            .stdin(Stdio::null());
        match target {
            Target::Url(url) => {
                c.arg("--url").arg(url);
            }
            Target::Direct {
                command,
                args,
                env,
                cwd,
            } => {
                let env: serde_json::Map<String, Value> = env
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                c.arg("--env").arg(Value::Object(env).to_string());
                c.arg("--cwd").arg(cwd);
                c.arg("--").arg(command).args(args);
            }
        }
        let o = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|_| {
            json!({"error": format!("no JSON from the client: {stdout}{}",
                String::from_utf8_lossy(&o.stderr))})
        })
    }
}

enum Target<'a> {
    Url(&'a str),
    Direct {
        command: &'a str,
        args: &'a [String],
        env: Vec<(String, String)>,
        cwd: &'a Path,
    },
}

/// Skips loudly, or gives the corpus.
fn corpus_or_skip(test: &str, needs: &[&str]) -> Option<Corpus> {
    // Opt-in: the corpus installs ~600 MB of real servers and runs for
    // minutes, more than the README's test command should ask of a fresh
    // machine; `.ci/run` sets it (D198).
    if std::env::var_os("XY_COMPAT").is_none() {
        Skip {
            reason: "the compatibility corpus runs with XY_COMPAT=1 (.ci/run sets it)".into(),
        }
        .announce(test);
        return None;
    }
    for program in needs {
        if xy_testbins::interop::which(program).is_none() {
            Skip {
                reason: format!("{program} is not installed (.ci/run installs it)"),
            }
            .announce(test);
            return None;
        }
    }
    match corpus::corpus() {
        Interop::Ready(c) => Some(c),
        Interop::Skip(skip) => {
            skip.announce(test);
            None
        }
    }
}

/// Installs `row` the README's way, calls it through xy and directly, and
/// asserts both give the same tools and results. A row that fails while a
/// registry it needs cannot be reached is a loud skip, not a failure.
fn check(name: &'static str, needs: &[&str], row: impl FnOnce(&World) -> Row) {
    let test = format!("compat::{name}");
    let Some(corpus) = corpus_or_skip(&test, needs) else {
        return;
    };
    let w = World::new(name, corpus);
    let row = row(&w);
    let net = row.install.needs();
    if let Err(why) = run_row(&w, name, row) {
        if let Some(offline) = unreachable(&net) {
            Skip {
                reason: format!("{offline}, and the row failed: {why}"),
            }
            .announce(&test);
            return;
        }
        panic!("{why}");
    }
}

/// [`check`]'s work; `Err` names the server, the column that failed and
/// xy's `why`.
fn run_row(w: &World, name: &'static str, row: Row) -> Result<(), String> {
    // The daemon starts from the user's plain environment.
    let (ok, out) = w.xyctl(&["list"], None, false);
    if !ok {
        return Err(format!("{name}: xyctl list did not start xyd: {out}"));
    }

    let t0 = Instant::now();
    // `import` has no `--port`: it takes the first free one from 8400 up,
    // which two worlds' imports would both take before either binds it.
    static IMPORTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = matches!(row.install, Install::Import { .. })
        .then(|| IMPORTING.lock().unwrap_or_else(|e| e.into_inner()));
    let (server, installed, add_waited) = install(w, &row.install);
    let installing = t0.elapsed();
    let started = Instant::now();
    let ready = w.ready(server);
    drop(guard);
    let through = match (&installed, ready) {
        (Err(e), _) => Err(format!("install failed: {e}")),
        (Ok(_), Err(e)) => Err(e),
        (Ok(_), Ok(entry)) => {
            let url = entry["gateway_url"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("http://127.0.0.1:{}/{server}/mcp", w.gateway));
            let via_gateway = w.client(&row.calls, Target::Url(&url));
            let own = entry["url"].as_str().unwrap_or_default().to_owned();
            let via_port = w.client(&json!([]), Target::Url(&own));
            if via_port.get("error").is_none() && via_port["tools"] != via_gateway["tools"] {
                Err(format!(
                    "the server's own port lists {} but the gateway {}",
                    via_port["tools"], via_gateway["tools"]
                ))
            } else {
                Ok(via_gateway)
            }
        }
    };
    let waited = started.elapsed();
    let t1 = Instant::now();

    // Directly: the same install, by the command line of its server file.
    let set = xy_core::config::load_dir(&w.h.config_dir())
        .map_err(|e| format!("{name}: the server files do not load: {e:?}"))?;
    let Some(cfg) = set.servers.get(server) else {
        return Err(format!(
            "{name}: no server file for {server} after the install:\n{}",
            installed.as_ref().err().cloned().unwrap_or_default()
        ));
    };
    let mut env = w.base_env();
    env.extend(cfg.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let cwd = cfg
        .working_dir
        .clone()
        .filter(|d| d.is_dir())
        .or_else(|| match &row.install {
            Install::Stdio(dir, _) => Some(dir.clone()),
            _ => None,
        })
        .unwrap_or_else(|| w.home().to_path_buf());
    let direct = w.client(
        &row.calls,
        Target::Direct {
            command: &cfg.command,
            args: &cfg.args,
            env,
            cwd: &cwd,
        },
    );
    xy_testbins::out::err(&format!(
        "compat::{name}: install {:.1}s (of it, add's wait for the first listing {}), first \
         listing and calls through xy {:.1}s, direct {:.1}s",
        installing.as_secs_f64(),
        add_waited.map_or_else(|| "-".to_owned(), |d| format!("{:.1}s", d.as_secs_f64())),
        waited.as_secs_f64(),
        t1.elapsed().as_secs_f64()
    ));
    if let Some(e) = direct.get("error") {
        return Err(format!(
            "{name}: does not work DIRECTLY ({} {}): {e}\n(the corpus row is wrong, not xy)",
            cfg.command,
            cfg.args.join(" ")
        ));
    }
    let through = match through {
        Ok(v) if v.get("error").is_none() => v,
        Ok(v) => {
            return Err(format!(
                "{name}: works directly, NOT through xy: the SDK client failed: {}\n{}",
                v["error"],
                w.status(server)
            ));
        }
        Err(e) => {
            return Err(format!(
                "{name}: works directly, NOT through xy: {e}\n{}",
                w.status(server)
            ));
        }
    };
    if through["tools"] != direct["tools"] {
        return Err(format!(
            "{name}: through xy the tools differ from directly: {} against {}\n{}",
            through["tools"],
            direct["tools"],
            w.status(server)
        ));
    }
    let (a, b) = (
        through["results"].as_array().cloned().unwrap_or_default(),
        direct["results"].as_array().cloned().unwrap_or_default(),
    );
    for (x, d) in a.iter().zip(&b) {
        if x != d {
            return Err(format!(
                "{name}: the call {} gives a different result through xy than directly:\n\
                 through xy: {x}\ndirectly:   {d}\n{}",
                d["tool"],
                w.status(server)
            ));
        }
    }
    if a.len() != b.len() {
        return Err(format!("{name}: not every call answered"));
    }
    exfiltration_blocked(w, server);
    for d in &b {
        if d["is_error"] != false {
            return Err(format!(
                "{name}: the call {} fails even directly: {}\n(the corpus row is wrong, not xy)",
                d["tool"], d["text"]
            ));
        }
    }
    Ok(())
}

/// SPEC §25's "Done when": under the starter block that lets the server
/// run, `xyctl sandbox test` still gets none of the exfiltration probes
/// through (`~/.ssh`, `~/.aws`, another server's files, xy's state and
/// socket).
fn exfiltration_blocked(w: &World, server: &str) {
    let (_, out) = w.xyctl(&["sandbox", "test", server, "--json"], None, false);
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|_| panic!("{server}: xyctl sandbox test --json: {out}"));
    let secret = [".ssh", ".aws", "state dir", "another server", "socket"];
    let through: Vec<&Value> = v["probes"]
        .as_array()
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    let through: Vec<String> = through
        .into_iter()
        .filter(|p| {
            let probe = p["probe"].as_str().unwrap_or_default();
            secret.iter().any(|s| probe.contains(s)) && p["outcome"] == "allowed"
        })
        .map(|p| format!("{} ({})", p["probe"], p["detail"]))
        .collect();
    assert!(
        through.is_empty() && v["sandbox"].is_object(),
        "{server}: the starter sandbox lets exfiltration probes through: {through:?}\n{out}"
    );
}

/// Runs the row's install; the server's name, the install's output (`Err`
/// with it when the command failed) and how long the command waited for
/// the server's first listing.
fn install<'a>(w: &'a World, how: &Install) -> (&'a str, Result<String, String>, Option<Duration>) {
    let name = w.name;
    let waited = std::cell::Cell::new(None);
    let run = |args: Vec<String>, dir: Option<&Path>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out, wait) = w.xyctl_install(&args, dir);
        waited.set(wait);
        if ok { Ok(out) } else { Err(out) }
    };
    // Worlds run side by side: each `add` names its own port (SPEC §14's
    // `--port`), since "the first free one from 8400" races between them.
    let port = xy_testbins::locate::free_port().to_string();
    let with_tail = |mut v: Vec<String>, tail: &[String]| {
        v.extend(["--port".to_owned(), port.clone()]);
        if !tail.is_empty() {
            v.push("--".into());
            v.extend(tail.iter().cloned());
        }
        v
    };
    let out = match how {
        Install::Npm(pkg, tail) => {
            let spec = format!("{pkg}@{}", corpus::pin(pkg));
            run(
                with_tail(
                    vec![
                        "add".into(),
                        name.into(),
                        "--npm".into(),
                        spec,
                        "--yes".into(),
                    ],
                    tail,
                ),
                None,
            )
        }
        Install::Pypi(pkg, tail) => {
            let spec = format!("{pkg}=={}", corpus::pin(pkg));
            run(
                with_tail(
                    vec![
                        "add".into(),
                        name.into(),
                        "--pypi".into(),
                        spec,
                        "--yes".into(),
                    ],
                    tail,
                ),
                None,
            )
        }
        Install::Stdio(dir, command) => run(
            with_tail(vec!["add".into(), name.into(), "--stdio".into()], command),
            Some(dir),
        ),
        Install::Import { command, args, pin } => {
            // Where Claude Desktop keeps it on Linux: `$XDG_CONFIG_HOME/Claude`.
            let xdg_config =
                w.h.config_dir()
                    .parent()
                    .unwrap()
                    .parent()
                    .unwrap()
                    .to_owned();
            let file = xdg_config.join("Claude/claude_desktop_config.json");
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            let doc = json!({"mcpServers": {name: {"command": command, "args": args}}});
            std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
            let mut v: Vec<String> = vec!["import".into(), "claude-desktop".into()];
            if *pin {
                v.extend(["--pin".into(), "--yes".into()]);
            }
            let out = run(v, None);
            // `import` writes the files; the daemon reloads on `xyctl reload`
            // only when import did not (it does, by SPEC §14).
            match out {
                Ok(o) if *pin && !o.contains("pinned") => Err(format!("not pinned:\n{o}")),
                other => other,
            }
        }
    };
    (name, out, waited.get())
}

/// A directory under the world's HOME, created.
fn dir_in(w: &World, rel: &str) -> PathBuf {
    let d = w.home().join(rel);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(v: &Path) -> String {
    v.display().to_string()
}

/// A git repository with one commit, for `mcp-server-git`.
fn git_repo(w: &World) -> PathBuf {
    let repo = dir_in(w, "repo");
    std::fs::write(repo.join("README.md"), "corpus\n").unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .env("HOME", w.home())
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&[
        "-c",
        "user.name=xy",
        "-c",
        "user.email=xy@example.com",
        "add",
        ".",
    ]);
    git(&[
        "-c",
        "user.name=xy",
        "-c",
        "user.email=xy@example.com",
        "commit",
        "-qm",
        "first",
    ]);
    repo
}

/// A page for the browser rows, offline.
const PAGE: &str = "data:text/html,<title>xy corpus</title><h1>hello from the corpus</h1>";

mod compat {
    use super::*;

    fn memory_calls() -> Value {
        json!([
            ["create_entities", {"entities": [{"name": "xy-corpus", "entityType": "test", "observations": ["one"]}]}],
            ["search_nodes", {"query": "xy-corpus"}],
            ["add_observations", {"observations": [{"entityName": "xy-corpus", "contents": ["two"]}]}],
            ["open_nodes", {"names": ["xy-corpus"]}],
            ["delete_entities", {"entityNames": ["xy-corpus"]}],
            ["read_graph", {}]
        ])
    }

    #[test]
    fn memory() {
        check("memory", &[], |_| Row {
            install: Install::Npm("@modelcontextprotocol/server-memory", vec![]),
            calls: memory_calls(),
        });
    }

    #[test]
    fn filesystem() {
        check("filesystem", &[], |w| {
            let files = dir_in(w, "notes");
            let f = s(&files.join("a.txt"));
            Row {
                install: Install::Npm("@modelcontextprotocol/server-filesystem", vec![s(&files)]),
                calls: json!([
                    ["list_allowed_directories", {}],
                    ["write_file", {"path": f, "content": "hello\n"}],
                    ["read_text_file", {"path": f}],
                    ["create_directory", {"path": s(&files.join("sub"))}],
                    ["list_directory", {"path": s(&files)}],
                    ["search_files", {"path": s(&files), "pattern": "*.txt"}]
                ]),
            }
        });
    }

    #[test]
    fn everything() {
        check("everything", &[], |_| Row {
            install: Install::Npm("@modelcontextprotocol/server-everything", vec![]),
            calls: json!([
                ["echo", {"message": "hello"}],
                ["get-sum", {"a": 2, "b": 3}]
            ]),
        });
    }

    #[test]
    fn sequential_thinking() {
        check("sequential-thinking", &[], |_| Row {
            install: Install::Npm("@modelcontextprotocol/server-sequential-thinking", vec![]),
            calls: json!([
                ["sequentialthinking", {"thought": "one step", "thoughtNumber": 1,
                    "totalThoughts": 1, "nextThoughtNeeded": false}]
            ]),
        });
    }

    #[test]
    fn playwright() {
        check("playwright", &["chromium"], |_| Row {
            install: Install::Npm(
                "@playwright/mcp",
                [
                    "--headless",
                    "--isolated",
                    "--no-sandbox",
                    "--executable-path",
                ]
                .iter()
                .map(|a| (*a).to_owned())
                .chain([s(&xy_testbins::interop::which("chromium").unwrap())])
                .collect(),
            ),
            calls: json!([
                ["browser_navigate", {"url": PAGE}, ["ref=e\\d+", "\\d+ms", "page-[0-9TZ-]+\\.yml"]],
                ["browser_snapshot", {}, ["ref=e\\d+", "page-[0-9TZ-]+\\.yml"]]
            ]),
        });
    }

    #[test]
    fn chrome_devtools() {
        check("chrome-devtools", &["chromium"], |_| Row {
            install: Install::Npm(
                "chrome-devtools-mcp",
                vec![
                    "--headless".into(),
                    "--isolated".into(),
                    "--chrome-arg=--no-sandbox".into(),
                    format!(
                        "--executable-path={}",
                        s(&xy_testbins::interop::which("chromium").unwrap())
                    ),
                ],
            ),
            calls: json!([
                ["new_page", {"url": PAGE}],
                ["list_pages", {}]
            ]),
        });
    }

    /// Clock readings differ between the two runs; their shape must not.
    const CLOCK: &str = "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}[^\"]*";

    #[test]
    fn time() {
        check("time", &[], |_| Row {
            install: Install::Pypi(
                "mcp-server-time",
                vec!["--local-timezone".into(), "UTC".into()],
            ),
            calls: json!([
                ["get_current_time", {"timezone": "Europe/Stockholm"}, [CLOCK]],
                ["convert_time", {"source_timezone": "UTC", "time": "12:00",
                    "target_timezone": "Asia/Tokyo"}, [CLOCK]]
            ]),
        });
    }

    #[test]
    fn fetch() {
        check("fetch", &[], |w| {
            let site = dir_in(w, "site");
            std::fs::write(
                site.join("page.html"),
                "<html><body><h1>Corpus</h1><p>fetched offline</p></body></html>",
            )
            .unwrap();
            let port = serve(w, &site);
            Row {
                // A loopback page: the server refuses private addresses
                // unless told (in both columns alike).
                install: Install::Pypi("mcp-server-fetch", vec!["--allow-private-ips".into()]),
                calls: json!([
                    ["fetch", {"url": format!("http://127.0.0.1:{port}/page.html")}]
                ]),
            }
        });
    }

    #[test]
    fn git() {
        check("git", &[], |w| {
            let repo = git_repo(w);
            Row {
                install: Install::Pypi("mcp-server-git", vec!["--repository".into(), s(&repo)]),
                calls: json!([
                    ["git_status", {"repo_path": s(&repo)}],
                    ["git_log", {"repo_path": s(&repo), "max_count": 1}],
                    ["git_branch", {"repo_path": s(&repo), "branch_type": "local"}]
                ]),
            }
        });
    }

    #[test]
    fn markitdown() {
        check("markitdown", &[], |_| Row {
            install: Install::Pypi("markitdown-mcp", vec![]),
            calls: json!([
                ["convert_to_markdown", {"uri": "data:text/html;charset=utf-8,<h1>Corpus</h1><p>converted</p>"}]
            ]),
        });
    }

    #[test]
    fn excel() {
        check("excel", &[], |_| Row {
            install: Install::Pypi("excel-mcp-server", vec!["stdio".into()]),
            calls: json!([]),
        });
    }

    /// Keeps `~/.desktop-commander`; listing only (its tools act on the
    /// whole machine).
    #[test]
    fn desktop_commander() {
        check("desktop-commander", &[], |_| Row {
            install: Install::Npm("@wonderwhy-er/desktop-commander", vec![]),
            calls: json!([]),
        });
    }

    /// Keeps `~/.mongodb`; listing only (its tools need a database).
    #[test]
    fn mongodb() {
        check("mongodb", &[], |_| Row {
            install: Install::Npm("mongodb-mcp-server", vec![]),
            calls: json!([]),
        });
    }

    /// The user's own server in a project venv, by a relative command line
    /// from the project directory.
    #[test]
    fn mine() {
        check("mine", &[], |w| {
            let project = w.home().join("project");
            let o = Command::new("cp")
                .arg("-a")
                .arg(&w.corpus.project)
                .arg(&project)
                .output()
                .unwrap();
            assert!(o.status.success(), "copying the project: {o:?}");
            Row {
                install: Install::Stdio(
                    project,
                    vec![".venv/bin/python".into(), "server.py".into()],
                ),
                calls: json!([
                    ["add", {"a": 2, "b": 3}],
                    ["echo", {"text": "hello"}],
                    ["save", {"text": "a note"}]
                ]),
            }
        });
    }

    fn npx_filesystem(w: &World, pin: bool) -> Row {
        let files = dir_in(w, "notes");
        Row {
            install: Install::Import {
                command: "npx",
                args: vec![
                    "-y".into(),
                    format!(
                        "@modelcontextprotocol/server-filesystem@{}",
                        corpus::pin("@modelcontextprotocol/server-filesystem")
                    ),
                    s(&files),
                ],
                pin,
            },
            calls: json!([
                ["write_file", {"path": s(&files.join("a.txt")), "content": "hello\n"}],
                ["list_directory", {"path": s(&files)}]
            ]),
        }
    }

    fn uvx_git(w: &World, pin: bool) -> Row {
        let repo = git_repo(w);
        Row {
            install: Install::Import {
                command: "uvx",
                args: vec![
                    format!("mcp-server-git@{}", corpus::pin("mcp-server-git")),
                    "--repository".into(),
                    s(&repo),
                ],
                pin,
            },
            calls: json!([["git_status", {"repo_path": s(&repo)}]]),
        }
    }

    #[test]
    fn import_npx() {
        check("import-npx", &[], |w| npx_filesystem(w, false));
    }

    #[test]
    fn import_pin_npx() {
        check("import-pin-npx", &[], |w| npx_filesystem(w, true));
    }

    #[test]
    fn import_uvx() {
        check("import-uvx", &[], |w| uvx_git(w, false));
    }

    #[test]
    fn import_pin_uvx() {
        check("import-pin-uvx", &[], |w| uvx_git(w, true));
    }
}

/// A static HTTP server on loopback for the fetch row (the page a server
/// may fetch without the internet); stopped with the world.
fn serve(w: &World, dir: &Path) -> u16 {
    let port = xy_testbins::locate::free_port();
    let child = Command::new(&w.corpus.python)
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .arg("--directory")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    w.children.borrow_mut().push(child);
    xy_testbins::wait::wait_for(
        "the fetch row's page server",
        Duration::from_secs(10),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    port
}
