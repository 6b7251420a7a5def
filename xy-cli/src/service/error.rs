//! Why a service operation failed, as one error type with sentences a user
//! can act on.

use std::io;
use std::path::{Path, PathBuf};

use xy_core::paths::PathError;

use super::BACKEND_ENV;
use super::runner::Output;

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

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ServiceError + '_ {
    move |source| ServiceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A command that ran and exited non-zero, with what it printed.
pub(super) fn command_failed(argv: Vec<String>, out: &Output) -> ServiceError {
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
