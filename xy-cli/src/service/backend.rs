//! The one seam between the service manager and a backend: what launchd
//! and systemd each do for install, uninstall, start, stop and status.
//! [`super::Backend::ops`] is the only place that picks one.

use std::path::{Path, PathBuf};

use super::error::{ServiceError, command_failed};
use super::runner::{CommandRunner, Output};
use super::{AgentSpec, Host, ServiceStatus, StopOutcome, UninstallOutcome};

/// What a backend is handed for one operation: the label, this user's host
/// facts, and the door to `launchctl`/`systemctl`.
pub(crate) struct Session<'a> {
    pub(crate) label: &'a str,
    pub(crate) host: &'a Host,
    pub(crate) runner: &'a dyn CommandRunner,
}

impl Session<'_> {
    /// Runs `argv`; `Err` only when it could not be started.
    pub(crate) fn run(&self, argv: &[String]) -> Result<Output, ServiceError> {
        self.runner.run(argv).map_err(|source| ServiceError::Spawn {
            program: argv.first().cloned().unwrap_or_default(),
            source,
        })
    }

    /// Runs `argv` and fails unless it exited 0.
    pub(crate) fn run_ok(&self, argv: &[String]) -> Result<Output, ServiceError> {
        let out = self.run(argv)?;
        if out.success() {
            Ok(out)
        } else {
            Err(command_failed(argv.to_vec(), &out))
        }
    }
}

/// One service manager's behaviour. Every method gets the manager's
/// [`Session`]; files are placed by [`ServiceBackend::file`].
pub(crate) trait ServiceBackend {
    /// The launchd label or the systemd unit name.
    fn name<'a>(&self, label: &'a str) -> &'a str;
    /// The plist or unit file.
    fn file(&self, label: &str, host: &Host) -> PathBuf;
    /// `gui/<uid>` or `user`.
    fn domain(&self, host: &Host) -> String;
    /// Writes `file` from `spec` and starts the service (`existed`: it
    /// replaces an installation).
    fn install(
        &self,
        s: &Session<'_>,
        spec: &AgentSpec,
        file: &Path,
        existed: bool,
    ) -> Result<(), ServiceError>;
    /// Stops the service and removes `file`.
    fn uninstall(&self, s: &Session<'_>, file: &Path) -> Result<UninstallOutcome, ServiceError>;
    /// Starts the installed service.
    fn start(&self, s: &Session<'_>, file: &Path) -> Result<(), ServiceError>;
    /// Stops the service until the next login.
    fn stop(&self, s: &Session<'_>) -> Result<StopOutcome, ServiceError>;
    /// Fills what the installed `file` (its `bytes`) and the manager say.
    fn observe(
        &self,
        s: &Session<'_>,
        bytes: &[u8],
        st: &mut ServiceStatus,
    ) -> Result<(), ServiceError>;
}
