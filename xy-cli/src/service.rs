//! Start on login (SPEC §9): a LaunchAgent driven by `launchctl` on macOS, a
//! systemd user unit driven by `systemctl --user` on Linux. Builds the agent,
//! runs the service manager through a [`CommandRunner`] and returns what it
//! found as data; it never prints and knows nothing about clap.

mod backend;
mod error;
mod files;
mod launch_agent;
mod launchd;
mod manager;
mod program;
mod runner;
mod systemd;
mod systemd_unit;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;
use xy_core::paths::Paths;

use self::backend::ServiceBackend;
pub(crate) use self::error::ServiceError;
pub(crate) use self::manager::ServiceManager;

#[cfg(test)]
use self::files::tail_lines;
#[cfg(test)]
use launch_agent::read_plist;
pub(crate) use program::{locate_xyd, program_warning, stable_xyctl};
pub(crate) use runner::CommandRunner;
#[cfg(test)]
use runner::Output;
#[cfg(test)]
use systemd_unit::{read_unit, render_unit};

/// The LaunchAgent label: the reverse-DNS form of the project's git host.
pub(crate) const DEFAULT_LABEL: &str = "se.aceofba.xy";
/// Selects the backend regardless of the OS (`launchd` or `systemd`).
pub(crate) const BACKEND_ENV: &str = "XY_SERVICE_BACKEND";
/// The PATH a service gets when the installing process had none.
pub(crate) const FALLBACK_PATH: &str = "/usr/bin:/bin:/usr/sbin:/sbin";
/// Lines of `launchd.log` that `status` returns when the agent is not running.
pub(crate) const LOG_TAIL_LINES: usize = 10;

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

    /// The one dispatch from the backend's name to its behaviour.
    pub(crate) fn ops(self) -> &'static dyn ServiceBackend {
        match self {
            Backend::Launchd => &launchd::Launchd,
            Backend::Systemd => &systemd::Systemd,
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

/// The installed start-on-login service of this user (default label), if
/// any; for detect-or-spawn, which asks the service manager to start the
/// daemon rather than spawning a second, unmanaged one.
pub(crate) fn installed_service() -> Option<ServiceManager> {
    ServiceManager::from_env(DEFAULT_LABEL)
        .ok()
        .filter(ServiceManager::is_installed)
}

/// Starts an installed service through its manager (see [`installed_service`]).
pub(crate) fn start_service(service: &ServiceManager) -> Result<(), ServiceError> {
    service.start()
}

#[cfg(test)]
mod tests;
