//! [`ServiceManager`]: one user's start-on-login service on one backend.
//! The verbs here are backend-neutral (file checks, the status skeleton);
//! the backend does the rest through [`super::backend::ServiceBackend`].

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::PathBuf;

use super::backend::Session;
use super::error::ServiceError;
use super::runner::{CommandRunner, SystemRunner};
use super::{
    AgentSpec, Backend, FALLBACK_PATH, Host, InstallReport, RunState, ServiceStatus, StopOutcome,
    UninstallOutcome,
};

/// One user's start-on-login service on one backend.
#[derive(Debug, Clone)]
pub(crate) struct ServiceManager<R = SystemRunner> {
    backend: Backend,
    label: String,
    pub(super) host: Host,
    pub(super) runner: R,
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

    fn session(&self) -> Session<'_> {
        Session {
            label: &self.label,
            host: &self.host,
            runner: &self.runner,
        }
    }

    /// The launchd label or the systemd unit name.
    pub(crate) fn name(&self) -> &str {
        self.backend.ops().name(&self.label)
    }

    /// The plist (`~/Library/LaunchAgents/<label>.plist`) or unit file.
    pub(crate) fn file(&self) -> PathBuf {
        self.backend.ops().file(&self.label, &self.host)
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
        let installed = self
            .backend
            .ops()
            .install(&self.session(), spec, &file, existed);
        if let Err(e) = installed {
            // A new file the service manager would not take is removed: left
            // behind, it would count as installed, so detect-or-spawn would
            // go through a service that cannot start and `install` would ask
            // for --force. A replaced file stays (the old one is gone anyway).
            if !existed {
                let _ = fs::remove_file(&file);
            }
            return Err(e);
        }
        Ok(InstallReport {
            file,
            replaced: existed,
        })
    }

    /// Stops the service and removes its file. Absent is not an error.
    pub(crate) fn uninstall(&self) -> Result<UninstallOutcome, ServiceError> {
        self.backend.ops().uninstall(&self.session(), &self.file())
    }

    /// Starts the installed service now.
    pub(crate) fn start(&self) -> Result<(), ServiceError> {
        let file = self.require_installed()?;
        self.backend.ops().start(&self.session(), &file)
    }

    /// Stops the service until the next login (the file stays).
    pub(crate) fn stop(&self) -> Result<StopOutcome, ServiceError> {
        self.require_installed()?;
        self.backend.ops().stop(&self.session())
    }

    /// What is installed and whether it runs. Fails only when the service
    /// manager cannot be asked.
    pub(crate) fn status(&self) -> Result<ServiceStatus, ServiceError> {
        let file = self.file();
        let ops = self.backend.ops();
        let mut st = ServiceStatus {
            backend: self.backend,
            name: self.name().to_owned(),
            domain: ops.domain(&self.host),
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
        ops.observe(&self.session(), &bytes, &mut st)?;
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
}
