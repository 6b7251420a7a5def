//! The xyctl integration tests' shared harness: a private HOME (optionally
//! with its own XDG dirs) and a short socket path, the real `xyctl` run
//! against it, socket calls through the shared `xy_core::client`, and
//! polling with a deadline (`xy_testbins::wait`). Each test binary uses a subset of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;
use xy_core::client::Client;

pub(crate) const XYCTL: &str = env!("CARGO_BIN_EXE_xyctl");

/// How long one socket call may take (the machine is shared and loaded),
/// before [`scaled`].
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

// Each test binary uses a subset of these.
#[allow(unused_imports)]
pub(crate) use xy_testbins::wait::{scaled, wait_for, wait_some};

/// A private xy world: HOME in a tempdir and a short socket under /tmp
/// (`sun_path` is ~104 bytes). The daemon is stopped on drop.
pub(crate) struct Home {
    root: tempfile::TempDir,
    /// The socket `xyctl` is pointed at (`XY_SOCKET`).
    pub(crate) socket: PathBuf,
    /// Whether `XDG_CONFIG_HOME`/`XDG_STATE_HOME` are set (else xy derives
    /// them from HOME, as on a user's machine).
    xdg: bool,
}

impl Home {
    /// Only HOME is set: nothing under it yet, as on a first run. `tag`
    /// prefixes the temp dir and socket names (one per test file).
    pub(crate) fn new(tag: &str) -> Home {
        Home::make(tag, false)
    }

    /// HOME plus `XDG_CONFIG_HOME=<root>/config` and
    /// `XDG_STATE_HOME=<root>/state`, the config dir already created.
    pub(crate) fn with_xdg(tag: &str) -> Home {
        let h = Home::make(tag, true);
        std::fs::create_dir_all(h.config_dir()).unwrap();
        std::fs::create_dir_all(h.state_home()).unwrap();
        // The gateway's default port is one per machine and test daemons
        // run many at once (and beside a user's own xyd): off here, and
        // the console's likewise.
        std::fs::write(
            h.config_dir().parent().unwrap().join("xy.kdl"),
            "gateway { port 0; }\nconsole { port 0; }\n",
        )
        .unwrap();
        h
    }

    fn make(tag: &str, xdg: bool) -> Home {
        static N: AtomicU32 = AtomicU32::new(0);
        // Makes sure a current `xyd` sits next to `xyctl`, where
        // detect-or-spawn looks first.
        xy_testbins::locate::xyd();
        let root = tempfile::Builder::new()
            .prefix(&format!("{tag}-"))
            .tempdir()
            .unwrap();
        let socket = PathBuf::from(format!(
            "/tmp/{tag}-{}-{}.sock",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_file(&socket);
        Home { root, socket, xdg }
    }

    pub(crate) fn home(&self) -> &Path {
        self.root.path()
    }

    pub(crate) fn config_dir(&self) -> PathBuf {
        let base = if self.xdg { "config" } else { ".config" };
        self.home().join(base).join("xy/servers")
    }

    pub(crate) fn state_home(&self) -> PathBuf {
        let base = if self.xdg { "state" } else { ".local/state" };
        self.home().join(base)
    }

    /// The whole environment `xyctl` (and the `xyd` it starts) sees.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let p = |p: &Path| p.display().to_string();
        let mut env = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), p(self.home())),
            ("XY_SOCKET".into(), p(&self.socket)),
        ];
        if self.xdg {
            env.push(("XDG_CONFIG_HOME".into(), p(&self.home().join("config"))));
            env.push(("XDG_STATE_HOME".into(), p(&self.state_home())));
        }
        env
    }

    /// `xyctl <args>` in this world, stdin closed.
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(XYCTL);
        c.args(args)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null());
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        Run(self.cmd(args).output().unwrap())
    }

    /// Writes `<config dir>/<name>.kdl`.
    pub(crate) fn write_config(&self, name: &str, text: &str) {
        std::fs::create_dir_all(self.config_dir()).unwrap();
        std::fs::write(self.config_dir().join(format!("{name}.kdl")), text).unwrap();
    }

    /// One JSON-RPC call on the socket; its `result` (panics on an error).
    pub(crate) fn call(&self, method: &str, params: Option<Value>) -> Value {
        let mut c = Client::connect(&self.socket, scaled(CALL_TIMEOUT))
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        c.call(method, params.as_ref(), scaled(CALL_TIMEOUT))
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// The daemon's `list` result.
    pub(crate) fn list(&self) -> Vec<Value> {
        self.call("list", None)
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The state of server `name`, `None` when it is not configured.
    pub(crate) fn state_of(&self, name: &str) -> Option<String> {
        self.list()
            .into_iter()
            .find(|e| e["name"] == name)
            .map(|e| e["state"].as_str().unwrap_or_default().to_owned())
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = self
            .cmd(&["daemon", "stop"])
            .env("XY_NO_SPAWN", "1")
            .output();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A finished `xyctl` run.
pub(crate) struct Run(pub(crate) Output);

impl Run {
    pub(crate) fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }

    pub(crate) fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    /// Asserts exit 0 (showing both streams if not); the stdout.
    #[track_caller]
    pub(crate) fn ok(&self) -> String {
        self.expect(0);
        self.stdout()
    }

    /// Asserts exit `code` (showing both streams if not); the stderr.
    #[track_caller]
    pub(crate) fn fails(&self, code: i32) -> String {
        self.expect(code);
        self.stderr()
    }

    #[track_caller]
    fn expect(&self, code: i32) {
        assert_eq!(
            self.code(),
            code,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
    }
}
