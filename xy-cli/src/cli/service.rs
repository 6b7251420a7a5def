//! `xyctl service …` as clap types: the verbs and which service they act on.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::service;

/// `xyctl service …`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ServiceCmd {
    /// Install the start-on-login service (launchd agent or systemd user unit) and start xyd
    Install(InstallArgs),
    /// Stop xyd and remove the start-on-login service
    Uninstall(Target),
    /// Start the installed service now
    Start(Target),
    /// Stop the service until the next login (`uninstall` disables it for good)
    Stop(Target),
    /// Show whether the service is installed and running, and what it runs
    Status(StatusArgs),
}

/// Which service.
#[derive(Debug, Clone, Args)]
pub(crate) struct Target {
    /// The launchd label (a test can install a second agent under its own)
    #[arg(long, value_name = "LABEL", default_value = service::DEFAULT_LABEL)]
    pub(crate) label: String,
}

/// `xyctl service install`.
#[derive(Debug, Clone, Args)]
pub(crate) struct InstallArgs {
    /// Replace an existing installation: re-snapshots PATH and the xyd path, restarts xyd
    #[arg(long)]
    pub(crate) force: bool,
    /// The xyd binary to run [default: next to xyctl, else the first on PATH]
    #[arg(long, value_name = "PATH")]
    pub(crate) xyd: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) target: Target,
}

/// `xyctl service status`.
#[derive(Debug, Clone, Args)]
pub(crate) struct StatusArgs {
    /// Print the status as JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) target: Target,
}

impl ServiceCmd {
    pub(crate) fn label(&self) -> &str {
        match self {
            ServiceCmd::Install(a) => &a.target.label,
            ServiceCmd::Uninstall(t) | ServiceCmd::Start(t) | ServiceCmd::Stop(t) => &t.label,
            ServiceCmd::Status(a) => &a.target.label,
        }
    }
}
