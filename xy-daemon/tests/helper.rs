//! The `TestDaemon` fixture (a real `xyd` on temp XDG dirs and a short socket
//! path), a raw line client that speaks like socat, the test children from
//! `xy-testbins`, and polling helpers. No fixed sleeps: everything waits
//! for a condition with a deadline.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Generous: CI machines have 2 cores and run tests in parallel. Like
/// every test deadline it is stretched by `XY_TEST_TIMEOUT_FACTOR`: through
/// the wait helpers, or [`scaled`] where it is used directly.
pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

pub(crate) use xy_testbins::wait::{scaled, wait_for, wait_some};

/// Path of one `xy-testbins` binary, building the package once if missing.
pub(crate) fn testbin(name: &str) -> PathBuf {
    xy_testbins::locate::testbin(name)
}

pub(crate) fn xyd() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_xyd"))
}

/// A KDL config running `xy-test-sleep` on `port`.
pub(crate) fn sleep_config(port: u16, interval_ms: u64) -> String {
    format!(
        "command \"{}\"\nargs \"--interval-ms\" \"{interval_ms}\"\nport {port}\nstop {{\n    grace \"3s\"\n}}\n",
        testbin("xy-test-sleep").display()
    )
}

/// Ports only need to be distinct within one daemon's config set.
pub(crate) fn port(n: u16) -> u16 {
    41000 + n
}

/// Temp dirs for one daemon; the socket sits in a short /tmp path.
pub(crate) struct Env {
    pub(crate) root: tempfile::TempDir,
    pub(crate) config_home: PathBuf,
    pub(crate) state_home: PathBuf,
    pub(crate) socket: PathBuf,
}

impl Env {
    pub(crate) fn new() -> Env {
        let root = tempfile::Builder::new()
            .prefix("xyd")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let config_home = root.path().join("c");
        let state_home = root.path().join("s");
        std::fs::create_dir_all(config_home.join("xy/servers")).unwrap();
        // The gateway's default port is one for the whole machine: test
        // daemons run many at once, so only the gateway's own tests turn
        // it on (`write_settings`), each on a port of its own. The console's
        // default port likewise (SPEC §28).
        std::fs::write(
            config_home.join("xy/xy.kdl"),
            "gateway { port 0; }\nconsole { port 0; }\n",
        )
        .unwrap();
        let socket = root.path().join("x.sock");
        Env {
            root,
            config_home,
            state_home,
            socket,
        }
    }

    pub(crate) fn config_dir(&self) -> PathBuf {
        self.config_home.join("xy/servers")
    }

    pub(crate) fn state_dir(&self) -> PathBuf {
        self.state_home.join("xy")
    }

    pub(crate) fn write_config(&self, name: &str, kdl: &str) {
        std::fs::write(self.config_dir().join(format!("{name}.kdl")), kdl).unwrap();
    }

    /// Replaces `xy.kdl`, the daemon's settings; the console stays off
    /// unless `kdl` sets it (its default port is one per machine).
    pub(crate) fn write_settings(&self, kdl: &str) {
        let text = if kdl.contains("console") {
            kdl.to_owned()
        } else {
            format!("{kdl}\nconsole {{ port 0; }}\n")
        };
        std::fs::write(self.config_home.join("xy/xy.kdl"), text).unwrap();
    }

    pub(crate) fn remove_config(&self, name: &str) {
        std::fs::remove_file(self.config_dir().join(format!("{name}.kdl"))).unwrap();
    }

    /// An `xyd` command with this environment (not yet spawned).
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(xyd());
        cmd.env("XDG_CONFIG_HOME", &self.config_home)
            .env("XDG_STATE_HOME", &self.state_home)
            // Sandboxed servers' homes (`<data>/xy/data/<name>`) stay in the test's tree.
            .env("XDG_DATA_HOME", self.root.path().join("d"))
            .env("XY_SOCKET", &self.socket)
            .env("XY_LOG", "info,xy_daemon=debug")
            .env_remove("XDG_RUNTIME_DIR")
            // Without a session bus xyd picks the file store, never the
            // keyring of whoever runs the tests (`secret_store.rs` brings
            // its own bus).
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `xyd` to completion (for boot failures), returning status and stderr.
    pub(crate) fn run_to_exit(&self, cmd: &mut Command) -> (ExitStatus, String) {
        let out = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = out.id();
        let out =
            wait_child(out, DEADLINE).unwrap_or_else(|| panic!("xyd (pid {pid}) did not exit"));
        (out.0, out.1)
    }

    pub(crate) fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.state_dir().join("logs/daemon.log")).unwrap_or_default()
    }
}

fn wait_child(mut child: Child, timeout: Duration) -> Option<(ExitStatus, String)> {
    let until = xy_testbins::wait::deadline(timeout);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Some((status, err));
        }
        if Instant::now() > until {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `xyd`. Dropping it stops the daemon (SIGTERM, then SIGKILL)
/// and kills any child group still recorded.
pub(crate) struct TestDaemon {
    pub(crate) env: Env,
    child: Option<Child>,
    stderr_path: PathBuf,
}

impl TestDaemon {
    /// Boots a daemon with the given configs and waits until it answers.
    pub(crate) fn start(configs: &[(&str, String)]) -> TestDaemon {
        let env = Env::new();
        for (name, kdl) in configs {
            env.write_config(name, kdl);
        }
        TestDaemon::start_in(env)
    }

    pub(crate) fn start_in(env: Env) -> TestDaemon {
        TestDaemon::start_in_with(env, &[])
    }

    /// Like [`TestDaemon::start_in`], with extra environment for `xyd`.
    pub(crate) fn start_in_with(env: Env, vars: &[(&str, std::ffi::OsString)]) -> TestDaemon {
        TestDaemon::start_in_adjusted(env, |cmd| {
            cmd.envs(vars.iter().map(|(k, v)| (*k, v)));
        })
    }

    /// Like [`TestDaemon::start_in`], with `adjust` applied to the `xyd`
    /// command before it is spawned (extra environment, `pre_exec`).
    pub(crate) fn start_in_adjusted(env: Env, adjust: impl FnOnce(&mut Command)) -> TestDaemon {
        let stderr_path = env.root.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut cmd = env.command();
        adjust(&mut cmd);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn xyd");
        let mut d = TestDaemon {
            env,
            child: Some(child),
            stderr_path,
        };
        d.wait_ready();
        d
    }

    /// Until `daemon_status` answers without `boot`: the orphan sweep is
    /// over and the servers are starting.
    fn wait_ready(&mut self) {
        let until = xy_testbins::wait::deadline(DEADLINE);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("xyd exited during boot ({status}): {}", self.stderr());
            }
            if let Ok(mut c) = Client::try_connect(&self.env.socket)
                && let Ok(v) = c.try_call("daemon_status", None)
                && v.get("result").is_some_and(|r| r.get("boot").is_none())
            {
                return;
            }
            assert!(Instant::now() < until, "xyd not ready: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub(crate) fn client(&self) -> Client {
        Client::connect(&self.env.socket)
    }

    /// One call on a fresh connection; returns the `result`, panics on error.
    pub(crate) fn result(&self, method: &str, params: Option<Value>) -> Value {
        self.client().result(method, params)
    }

    /// The `list` row of `name`.
    pub(crate) fn entry(&self, name: &str) -> Value {
        let list = self.result("list", None);
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    }

    /// Waits until `name` is `running` and returns its pid.
    pub(crate) fn running_pid(&self, name: &str) -> i32 {
        wait_some(&format!("{name} running"), DEADLINE, || {
            let e = self.entry(name);
            (e["state"] == "running").then(|| e["pid"].as_i64().expect("pid") as i32)
        })
    }

    /// Sends SIGTERM and waits for the exit status.
    pub(crate) fn terminate(&mut self) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        signal(child.id() as i32, libc::SIGTERM);
        self.wait_exit()
    }

    /// Hands the dirs to a new daemon (after this one exited).
    pub(crate) fn take_env(mut self) -> Env {
        let placeholder = Env::new();
        std::mem::replace(&mut self.env, placeholder)
    }

    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        let until = xy_testbins::wait::deadline(DEADLINE);
        loop {
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < until,
                "xyd did not exit: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take()
            && child.try_wait().ok().flatten().is_none()
        {
            signal(child.id() as i32, libc::SIGTERM);
            let until = xy_testbins::wait::deadline(Duration::from_secs(10));
            while child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever a killed daemon left behind: the engine's child records.
        if let Ok(dir) = std::fs::read_dir(self.env.state_dir().join("run")) {
            for e in dir.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path())
                    && let Ok(v) = serde_json::from_str::<Value>(&text)
                    && let Some(pgid) = v["pgid"].as_i64()
                    && pgid > 1
                {
                    signal(-(pgid as i32), libc::SIGKILL);
                }
            }
        }
    }
}

/// `kill(2)`; errors ignored (the target may be gone).
pub(crate) fn signal(pid: i32, sig: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::try_from(sig).ok(),
    );
}

/// Alive and not a zombie (a zombie has exited; see SPEC §4).
pub(crate) fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

/// A raw line client, the way socat talks, over the project's one line
/// client (`xy_core::client`): requests and replies as `Value`s.
pub(crate) struct Client {
    inner: xy_core::client::Client,
}

fn io_error(e: xy_core::client::ClientError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Client {
    pub(crate) fn try_connect(path: &Path) -> std::io::Result<Client> {
        let inner =
            xy_core::client::Client::connect(path, scaled(DEADLINE)).map_err(|e| match e {
                xy_core::client::ClientError::Connect { source, .. } => source,
                other => io_error(other),
            })?;
        Ok(Client { inner })
    }

    pub(crate) fn connect(path: &Path) -> Client {
        Client::try_connect(path).unwrap_or_else(|e| panic!("connect {}: {e}", path.display()))
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.inner.send_raw(bytes).expect("write to xyd");
    }

    pub(crate) fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\n").as_bytes());
    }

    /// Half-closes our side, as `echo … | socat` does at end of input.
    pub(crate) fn finish_sending(&mut self) {
        self.inner.shutdown_write().unwrap();
    }

    /// Next line, parsed; `None` at EOF.
    pub(crate) fn try_recv(&mut self) -> std::io::Result<Option<Value>> {
        let Some(line) = self
            .inner
            .read_line(Some(xy_testbins::wait::deadline(DEADLINE)))
            .map_err(io_error)?
        else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!("bad line {:?}: {e}", String::from_utf8_lossy(&line))
        })))
    }

    pub(crate) fn recv(&mut self) -> Value {
        self.try_recv()
            .expect("read from xyd")
            .expect("unexpected EOF from xyd")
    }

    /// Reads until EOF; returns what came.
    pub(crate) fn recv_to_eof(&mut self) -> Vec<Value> {
        let mut all = Vec::new();
        while let Some(v) = self.try_recv().expect("read until EOF") {
            all.push(v);
        }
        all
    }

    pub(crate) fn request(&mut self, method: &str, params: Option<Value>) -> u64 {
        self.inner
            .request(method, params.as_ref())
            .expect("write to xyd")
    }

    pub(crate) fn try_call(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> std::io::Result<Value> {
        let id = self.request(method, params);
        loop {
            let v = self
                .try_recv()?
                .ok_or_else(|| std::io::Error::other("EOF"))?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    }

    /// The full response to one call (notifications before it are skipped).
    pub(crate) fn call(&mut self, method: &str, params: Option<Value>) -> Value {
        self.try_call(method, params).expect("call xyd")
    }

    pub(crate) fn result(&mut self, method: &str, params: Option<Value>) -> Value {
        let v = self.call(method, params);
        assert!(v.get("error").is_none(), "{method} failed: {v}");
        v["result"].clone()
    }

    /// The error object of a call that must fail with `code`.
    #[track_caller]
    pub(crate) fn error(&mut self, method: &str, params: Option<Value>, code: i64) -> Value {
        let v = self.call(method, params);
        assert_eq!(v["error"]["code"], code, "{method}: {v}");
        v["error"].clone()
    }
}

/// A TCP port nobody listens on right now, outside the kernel's ephemeral
/// range, never one handed out before in this test process.
pub(crate) fn free_port() -> u16 {
    xy_testbins::locate::free_port()
}

/// A KDL config running `xy-test-mcp`, which binds and holds `port`.
pub(crate) fn mcp_config(port: u16) -> String {
    format!(
        "command \"{}\"\nargs \"--port\" \"{port}\"\nport {port}\nstop {{\n    grace \"2s\"\n}}\n",
        testbin("xy-test-mcp").display()
    )
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub(crate) fn port_answers(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(1),
    )
    .is_ok()
}

/// Resident set size of `pid` in KiB (`VmRSS` in `/proc/<pid>/status`).
pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// Open file descriptors of `pid` (entries of `/proc/<pid>/fd`).
pub(crate) fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("proc fd")
        .count()
}

/// The pid of every configured server, by name (`None` when not running).
pub(crate) fn pids(d: &TestDaemon) -> Vec<(String, Option<i64>)> {
    d.result("list", None)
        .as_array()
        .expect("list is an array")
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_owned(), e["pid"].as_i64()))
        .collect()
}

/// The lines `logs` returns for `name` with `params` (e.g. `{"tail": 100}`).
pub(crate) fn log_lines(d: &TestDaemon, name: &str, params: Value) -> Vec<String> {
    let mut c = d.client();
    let mut p = params;
    p["name"] = serde_json::json!(name);
    let id = c.request("logs", Some(p));
    let reply = c.recv();
    assert_eq!(reply["id"], id, "{reply}");
    let mut out = Vec::new();
    loop {
        let v = c.recv();
        match v["method"].as_str() {
            Some("log") => out.push(v["params"]["line"].as_str().unwrap().to_owned()),
            Some("log_end") => return out,
            _ => panic!("unexpected {v}"),
        }
    }
}

/// The processes whose parent is `pid` (the process table, not xy's word).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}
