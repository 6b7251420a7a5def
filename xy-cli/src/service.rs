//! Start on login (SPEC §9): a LaunchAgent driven by `launchctl` on macOS, a
//! systemd user unit driven by `systemctl --user` on Linux. Builds the agent,
//! runs the service manager through a [`CommandRunner`] and returns what it
//! found as data; it never prints and knows nothing about clap.

mod launch_agent;
mod program;
mod runner;
mod systemd_unit;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use xy_core::paths::{PathError, Paths};

pub(crate) use launch_agent::{parse_launchctl_print, read_plist, render_plist};
pub(crate) use program::{locate_xyd, program_warning};
pub(crate) use runner::{CommandRunner, Output, SystemRunner};
pub(crate) use systemd_unit::{parse_systemctl_show, read_unit, render_unit};

/// The LaunchAgent label: the reverse-DNS form of the project's git host.
pub(crate) const DEFAULT_LABEL: &str = "se.aceofba.xy";
/// Selects the backend regardless of the OS (`launchd` or `systemd`).
pub(crate) const BACKEND_ENV: &str = "XY_SERVICE_BACKEND";
/// The PATH a service gets when the installing process had none.
const FALLBACK_PATH: &str = "/usr/bin:/bin:/usr/sbin:/sbin";
/// How long to wait for launchd to forget a booted-out job before loading it again.
const BOOTOUT_WAIT: Duration = Duration::from_secs(5);
/// Lines of `launchd.log` that `status` returns when the agent is not running.
const LOG_TAIL_LINES: usize = 10;

/// Why a service operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    /// `install` without `--force` over an existing file.
    #[error("the service is already installed ({}); use --force to replace it", file.display())]
    AlreadyInstalled {
        /// The plist or unit file.
        file: PathBuf,
    },
    /// `start`/`stop` with no plist or unit file.
    #[error("the service is not installed ({} does not exist); run `xyctl service install`", file.display())]
    NotInstalled {
        /// The missing file.
        file: PathBuf,
    },
    /// `launchctl`/`systemctl` exited non-zero.
    #[error("`{}` failed ({}){}", argv.join(" "), exit_text(*code), detail_text(stderr))]
    CommandFailed {
        /// The command line.
        argv: Vec<String>,
        /// Its exit code.
        code: Option<i32>,
        /// What it printed on stderr (or stdout when stderr was empty).
        stderr: String,
    },
    /// `launchctl`/`systemctl` could not be run at all.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// No usable home directory.
    #[error("cannot find the home directory (HOME is unset or not absolute)")]
    NoHome,
    /// `XY_SERVICE_BACKEND` has an unknown value.
    #[error("{BACKEND_ENV}={0:?} is not one of: launchd, systemd")]
    UnknownBackend(String),
    /// No backend for this OS.
    #[error("start-on-login is only supported on macOS (launchd) and Linux (systemd)")]
    Unsupported,
    /// No `xyd` to run.
    #[error("cannot find xyd next to xyctl or on PATH; install it or pass --xyd <PATH>")]
    NoXyd,
    /// A value the plist or unit must carry is not UTF-8.
    #[error("{what} is not valid UTF-8")]
    NonUtf8 {
        /// Which value.
        what: &'static str,
    },
    /// The plist could not be written or read.
    #[error("plist: {0}")]
    Plist(String),
    /// xy's own paths could not be resolved.
    #[error(transparent)]
    Paths(#[from] PathError),
}

fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(
        || "killed by a signal".to_owned(),
        |c| format!("exit status {c}"),
    )
}

fn detail_text(stderr: &str) -> String {
    let s = stderr.trim();
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ServiceError + '_ {
    move |source| ServiceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Which service manager to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Backend {
    /// A LaunchAgent in `~/Library/LaunchAgents`, domain `gui/<uid>`.
    Launchd,
    /// A unit in `${XDG_CONFIG_HOME:-~/.config}/systemd/user`.
    Systemd,
}

impl Backend {
    /// This OS's service manager.
    pub(crate) fn native() -> Option<Backend> {
        if cfg!(target_os = "macos") {
            Some(Backend::Launchd)
        } else if cfg!(target_os = "linux") {
            Some(Backend::Systemd)
        } else {
            None
        }
    }

    /// `launchd` or `systemd`.
    pub(crate) fn parse(s: &str) -> Option<Backend> {
        match s {
            "launchd" => Some(Backend::Launchd),
            "systemd" => Some(Backend::Systemd),
            _ => None,
        }
    }

    /// `XY_SERVICE_BACKEND` when set (lets Linux tests drive the launchd
    /// backend against a fake `launchctl`), else [`Backend::native`].
    pub(crate) fn from_env() -> Result<Backend, ServiceError> {
        match std::env::var(BACKEND_ENV) {
            Ok(v) if !v.is_empty() => Backend::parse(&v).ok_or(ServiceError::UnknownBackend(v)),
            _ => Backend::native().ok_or(ServiceError::Unsupported),
        }
    }

    /// The backend's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Launchd => "launchd",
            Backend::Systemd => "systemd",
        }
    }
}

/// Everything the plist or unit is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentSpec {
    /// The launchd label (`se.aceofba.xy`).
    pub(crate) label: String,
    /// The canonical path of `xyd`.
    pub(crate) program: PathBuf,
    /// The installing process's `PATH`: a login agent's own is far poorer,
    /// and supervised servers launched through toolchain shims need it.
    pub(crate) path_snapshot: String,
    /// `$HOME`: the working directory, so relative paths in configs resolve
    /// somewhere predictable.
    pub(crate) home: PathBuf,
    /// `<log_dir>/launchd.log`: the agent's stdout and stderr.
    pub(crate) log_file: PathBuf,
}

/// The per-user facts the services are placed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// `${XDG_CONFIG_HOME:-~/.config}`.
    pub(crate) config_home: PathBuf,
    /// xy's log directory ([`Paths::log_dir`]).
    pub(crate) log_dir: PathBuf,
    /// The user id (`gui/<uid>`).
    pub(crate) uid: u32,
}

impl Host {
    /// From the process environment.
    pub(crate) fn from_env() -> Result<Host, ServiceError> {
        Host::resolve(
            |k| std::env::var_os(k),
            std::env::home_dir(),
            nix::unistd::getuid().as_raw(),
        )
    }

    /// From an environment lookup, a home directory and a uid; pure.
    pub(crate) fn resolve(
        env: impl Fn(&str) -> Option<OsString>,
        home: Option<PathBuf>,
        uid: u32,
    ) -> Result<Host, ServiceError> {
        let home = home
            .filter(|h| h.is_absolute())
            .ok_or(ServiceError::NoHome)?;
        let config_home = env("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        let paths = Paths::resolve(&env, Some(home.clone()))?;
        Ok(Host {
            home,
            config_home,
            log_dir: paths.log_dir,
            uid,
        })
    }
}

/// Running, stopped or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunState {
    /// The service manager runs the daemon.
    Running,
    /// Installed, but not running (stopped, crashed, waiting to restart).
    Stopped,
    /// No plist or unit file.
    NotInstalled,
}

/// What `status` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ServiceStatus {
    /// The service manager.
    pub(crate) backend: Backend,
    /// The launchd label or the unit name.
    pub(crate) name: String,
    /// `gui/<uid>` or `user` (systemd's user manager).
    pub(crate) domain: String,
    /// Whether the plist or unit file exists (the definition of installed).
    pub(crate) installed: bool,
    /// The daemon's state.
    pub(crate) state: RunState,
    /// The daemon's pid while running.
    pub(crate) pid: Option<u32>,
    /// The manager's own words when not plainly running (`not loaded`,
    /// `spawn scheduled`, `activating/auto-restart`).
    pub(crate) detail: Option<String>,
    /// The last exit status the manager recorded.
    pub(crate) last_exit: Option<String>,
    /// The plist or unit file.
    pub(crate) file: PathBuf,
    /// Why the file could not be read, if it could not.
    pub(crate) file_error: Option<String>,
    /// The `xyd` the service runs.
    pub(crate) program: Option<PathBuf>,
    /// The `PATH` snapshotted at install time.
    pub(crate) path_snapshot: Option<String>,
    /// When the snapshot was taken: the file's modification time.
    #[serde(serialize_with = "serialize_time")]
    pub(crate) snapshot_date: Option<SystemTime>,
    /// Where the agent's stdout and stderr go (launchd only; systemd uses the journal).
    pub(crate) log: Option<PathBuf>,
    /// The last lines of [`Self::log`] when not running.
    pub(crate) log_tail: Vec<String>,
}

fn serialize_time<S: serde::Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_some(&xy_core::time::rfc3339_ms(*t)),
        None => s.serialize_none(),
    }
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstallReport {
    /// The file written.
    pub(crate) file: PathBuf,
    /// Whether an existing installation was replaced (`--force`).
    pub(crate) replaced: bool,
}

/// What `uninstall` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UninstallOutcome {
    /// The service was stopped and its file removed.
    Removed(PathBuf),
    /// There was nothing to remove.
    NotInstalled,
}

/// What `stop` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopOutcome {
    /// The service was stopped (until the next login).
    Stopped,
    /// launchd did not have it loaded.
    AlreadyStopped,
}

/// One user's start-on-login service on one backend.
#[derive(Debug, Clone)]
pub(crate) struct ServiceManager<R = SystemRunner> {
    backend: Backend,
    label: String,
    host: Host,
    runner: R,
}

impl ServiceManager<SystemRunner> {
    /// The backend from [`Backend::from_env`], the host from the environment,
    /// and the real `launchctl`/`systemctl` found on `PATH`.
    pub(crate) fn from_env(label: &str) -> Result<Self, ServiceError> {
        Ok(ServiceManager::new(
            Backend::from_env()?,
            label,
            Host::from_env()?,
            SystemRunner,
        ))
    }
}

impl<R: CommandRunner> ServiceManager<R> {
    /// A manager over explicit parts.
    pub(crate) fn new(backend: Backend, label: &str, host: Host, runner: R) -> Self {
        ServiceManager {
            backend,
            label: label.to_owned(),
            host,
            runner,
        }
    }

    /// The launchd label or the systemd unit name.
    pub(crate) fn name(&self) -> &str {
        match self.backend {
            Backend::Launchd => &self.label,
            Backend::Systemd => systemd_unit::UNIT,
        }
    }

    /// The plist (`~/Library/LaunchAgents/<label>.plist`) or unit file.
    pub(crate) fn file(&self) -> PathBuf {
        match self.backend {
            Backend::Launchd => self
                .host
                .home
                .join("Library/LaunchAgents")
                .join(format!("{}.plist", self.label)),
            Backend::Systemd => self
                .host
                .config_home
                .join("systemd/user")
                .join(systemd_unit::UNIT),
        }
    }

    /// `<log_dir>/launchd.log`.
    pub(crate) fn log_file(&self) -> PathBuf {
        self.host.log_dir.join("launchd.log")
    }

    /// Whether the plist or unit file exists.
    pub(crate) fn is_installed(&self) -> bool {
        self.file().exists()
    }

    /// The agent to install: `program`, this `PATH` (a fallback when unset)
    /// and this host's home and log file.
    pub(crate) fn spec(
        &self,
        program: PathBuf,
        path: Option<&OsStr>,
    ) -> Result<AgentSpec, ServiceError> {
        let path_snapshot = match path.filter(|p| !p.is_empty()) {
            None => FALLBACK_PATH.to_owned(),
            Some(p) => p
                .to_str()
                .ok_or(ServiceError::NonUtf8 { what: "PATH" })?
                .to_owned(),
        };
        Ok(AgentSpec {
            label: self.label.clone(),
            program,
            path_snapshot,
            home: self.host.home.clone(),
            log_file: self.log_file(),
        })
    }

    /// Writes the plist or unit and starts the service. An existing
    /// installation is an error unless `force`, which replaces it and
    /// restarts the daemon (the upgrade path: new `xyd`, new `PATH`).
    pub(crate) fn install(
        &self,
        spec: &AgentSpec,
        force: bool,
    ) -> Result<InstallReport, ServiceError> {
        let file = self.file();
        let existed = file.exists();
        if existed && !force {
            return Err(ServiceError::AlreadyInstalled { file });
        }
        match self.backend {
            Backend::Launchd => {
                let bytes = render_plist(spec)?;
                create_private_dir(&self.host.log_dir)?;
                write_atomic(&file, &bytes)?;
                if self.launchd_loaded()? {
                    self.launchd_bootout()?;
                }
                self.run_ok(&launch_agent::bootstrap_cmd(self.host.uid, &file))?;
            }
            Backend::Systemd => {
                let text = render_unit(spec)?;
                write_atomic(&file, text.as_bytes())?;
                self.run_ok(&systemd_unit::daemon_reload_cmd())?;
                if existed {
                    // `enable --now` leaves a running daemon on the old unit.
                    self.run_ok(&systemd_unit::enable_cmd())?;
                    self.run_ok(&systemd_unit::restart_cmd())?;
                } else {
                    self.run_ok(&systemd_unit::enable_now_cmd())?;
                }
            }
        }
        Ok(InstallReport {
            file,
            replaced: existed,
        })
    }

    /// Stops the service and removes its file. Absent is not an error.
    pub(crate) fn uninstall(&self) -> Result<UninstallOutcome, ServiceError> {
        let file = self.file();
        match self.backend {
            Backend::Launchd => {
                let loaded = self.launchd_loaded()?;
                if !loaded && !file.exists() {
                    return Ok(UninstallOutcome::NotInstalled);
                }
                if loaded {
                    self.launchd_bootout()?;
                }
                remove_if_exists(&file)?;
            }
            Backend::Systemd => {
                if !file.exists() {
                    return Ok(UninstallOutcome::NotInstalled);
                }
                self.run_ok(&systemd_unit::disable_now_cmd())?;
                remove_if_exists(&file)?;
                self.run_ok(&systemd_unit::daemon_reload_cmd())?;
            }
        }
        Ok(UninstallOutcome::Removed(file))
    }

    /// Starts the installed service now.
    pub(crate) fn start(&self) -> Result<(), ServiceError> {
        let file = self.require_installed()?;
        match self.backend {
            Backend::Launchd => {
                if self.launchd_loaded()? {
                    self.run_ok(&launch_agent::kickstart_cmd(self.host.uid, &self.label))?;
                } else {
                    self.run_ok(&launch_agent::bootstrap_cmd(self.host.uid, &file))?;
                }
            }
            Backend::Systemd => {
                self.run_ok(&systemd_unit::start_cmd())?;
            }
        }
        Ok(())
    }

    /// Stops the service until the next login (the file stays).
    pub(crate) fn stop(&self) -> Result<StopOutcome, ServiceError> {
        self.require_installed()?;
        match self.backend {
            Backend::Launchd => {
                if !self.launchd_loaded()? {
                    return Ok(StopOutcome::AlreadyStopped);
                }
                self.launchd_bootout()?;
            }
            Backend::Systemd => {
                self.run_ok(&systemd_unit::stop_cmd())?;
            }
        }
        Ok(StopOutcome::Stopped)
    }

    /// What is installed and whether it runs. Fails only when the service
    /// manager cannot be asked.
    pub(crate) fn status(&self) -> Result<ServiceStatus, ServiceError> {
        let file = self.file();
        let mut st = ServiceStatus {
            backend: self.backend,
            name: self.name().to_owned(),
            domain: match self.backend {
                Backend::Launchd => launch_agent::domain(self.host.uid),
                Backend::Systemd => "user".to_owned(),
            },
            installed: false,
            state: RunState::NotInstalled,
            pid: None,
            detail: None,
            last_exit: None,
            file_error: None,
            program: None,
            path_snapshot: None,
            snapshot_date: None,
            log: None,
            log_tail: Vec::new(),
            file: file.clone(),
        };
        let bytes = match fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(st),
            Err(e) => {
                st.file_error = Some(e.to_string());
                Vec::new()
            }
        };
        st.installed = true;
        st.snapshot_date = fs::metadata(&file).and_then(|m| m.modified()).ok();
        match self.backend {
            Backend::Launchd => {
                match read_plist(&bytes) {
                    Ok(facts) => {
                        st.program = facts.program;
                        st.path_snapshot = facts.path_snapshot;
                        st.log = facts.log_file;
                    }
                    Err(e) if st.file_error.is_none() => st.file_error = Some(e.to_string()),
                    Err(_) => {}
                }
                let out = self.run(&launch_agent::print_cmd(self.host.uid, &self.label))?;
                if out.success() {
                    let p = parse_launchctl_print(&out.stdout);
                    st.state = if p.is_running() {
                        RunState::Running
                    } else {
                        RunState::Stopped
                    };
                    st.pid = p.pid.filter(|_| p.is_running());
                    st.detail = p.state.filter(|s| s != "running");
                    st.last_exit = p.last_exit;
                } else {
                    st.state = RunState::Stopped;
                    st.detail = Some("not loaded".to_owned());
                }
                if st.state != RunState::Running
                    && let Some(log) = &st.log
                {
                    st.log_tail = tail_lines(log, LOG_TAIL_LINES);
                }
            }
            Backend::Systemd => {
                let facts = read_unit(&String::from_utf8_lossy(&bytes));
                st.program = facts.program;
                st.path_snapshot = facts.path_snapshot;
                let show = parse_systemctl_show(&self.run_ok(&systemd_unit::show_cmd())?.stdout);
                st.state = if show.is_running() {
                    RunState::Running
                } else {
                    RunState::Stopped
                };
                st.pid = show.main_pid.filter(|_| show.is_running());
                if !show.is_running() {
                    st.detail = match (&show.active_state, &show.sub_state) {
                        (Some(a), Some(s)) => Some(format!("{a}/{s}")),
                        (Some(a), None) => Some(a.clone()),
                        _ => None,
                    };
                }
                st.last_exit = show.exec_main_status.map(|c| c.to_string());
            }
        }
        Ok(st)
    }

    fn require_installed(&self) -> Result<PathBuf, ServiceError> {
        let file = self.file();
        if file.exists() {
            Ok(file)
        } else {
            Err(ServiceError::NotInstalled { file })
        }
    }

    fn launchd_loaded(&self) -> Result<bool, ServiceError> {
        Ok(self
            .run(&launch_agent::print_cmd(self.host.uid, &self.label))?
            .success())
    }

    /// Boots the job out and waits (bounded) until launchd has forgotten it:
    /// a `bootstrap` right behind a `bootout` can otherwise fail with EIO.
    fn launchd_bootout(&self) -> Result<(), ServiceError> {
        let argv = launch_agent::bootout_cmd(self.host.uid, &self.label);
        let out = self.run(&argv)?;
        let deadline = Instant::now() + BOOTOUT_WAIT;
        loop {
            if !self.launchd_loaded()? {
                return Ok(());
            }
            if !out.success() || Instant::now() >= deadline {
                return Err(command_failed(argv, &out));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn run(&self, argv: &[String]) -> Result<Output, ServiceError> {
        self.runner.run(argv).map_err(|source| ServiceError::Spawn {
            program: argv.first().cloned().unwrap_or_default(),
            source,
        })
    }

    fn run_ok(&self, argv: &[String]) -> Result<Output, ServiceError> {
        let out = self.run(argv)?;
        if out.success() {
            Ok(out)
        } else {
            Err(command_failed(argv.to_vec(), &out))
        }
    }
}

fn command_failed(argv: Vec<String>, out: &Output) -> ServiceError {
    let stderr = if out.stderr.trim().is_empty() {
        &out.stdout
    } else {
        &out.stderr
    };
    ServiceError::CommandFailed {
        argv,
        code: out.code,
        stderr: stderr.clone(),
    }
}

/// The installed start-on-login service of this user (default label), if
/// any; for detect-or-spawn, which asks the service manager to start the
/// daemon rather than spawning a second, unmanaged one.
// Called by detect-or-spawn; the allow can go once that code is wired in.
#[allow(dead_code)]
pub(crate) fn installed_service() -> Option<ServiceManager> {
    ServiceManager::from_env(DEFAULT_LABEL)
        .ok()
        .filter(ServiceManager::is_installed)
}

/// Starts an installed service through its manager (see [`installed_service`]).
#[allow(dead_code)]
pub(crate) fn start_service(service: &ServiceManager) -> Result<(), ServiceError> {
    service.start()
}

fn create_private_dir(dir: &Path) -> Result<(), ServiceError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))
}

/// Writes through a temporary sibling and a rename, so the service manager
/// never reads a half-written file.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ServiceError> {
    let dir = path.parent().ok_or_else(|| ServiceError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"),
    })?;
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".xy-tmp");
    let tmp = dir.join(tmp_name);
    fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

fn remove_if_exists(path: &Path) -> Result<(), ServiceError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

/// The last `n` lines of a file (reading at most its last 64 KiB); empty
/// when it cannot be read.
pub(crate) fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    const WINDOW: u64 = 64 * 1024;
    let Ok(mut f) = fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(WINDOW);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // cut mid-line
    }
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests;
