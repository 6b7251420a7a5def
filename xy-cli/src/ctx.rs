//! What every command may need: the output styles, the resolved paths with
//! `--socket` applied, whether detect-or-spawn may start a daemon, and how
//! long a call may take.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use xy_core::paths::Paths;

use crate::cli::{Cli, ColorChoice};
use crate::error::{Exit, Failure};
use crate::render::Style;

/// How long a read-only call (`list`, `status`, `daemon_status`) may take
/// before the daemon counts as wedged.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `start`/`stop`/`restart`/`reload` may take: a stop waits for the
/// children's grace periods, so this is generous.
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(120);

/// What every command may need.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// Style for stdout.
    pub(crate) out: Style,
    /// Style for stderr.
    pub(crate) err: Style,
    /// `--no-spawn` / `XY_NO_SPAWN`.
    pub(crate) no_spawn: bool,
    /// `--socket` / `XY_SOCKET`.
    socket: Option<PathBuf>,
}

impl Ctx {
    /// From the parsed global flags and the environment.
    pub(crate) fn new(cli: &Cli) -> Ctx {
        Ctx::with(cli.color, cli.no_spawn, cli.socket.clone())
    }

    pub(crate) fn with(color: ColorChoice, no_spawn: bool, socket: Option<PathBuf>) -> Ctx {
        let no_color = std::env::var("NO_COLOR").ok();
        Ctx {
            out: Style::decide(color, std::io::stdout().is_terminal(), no_color.as_deref()),
            err: Style::decide(color, std::io::stderr().is_terminal(), no_color.as_deref()),
            no_spawn,
            // `XY_SOCKET=` (empty) means unset, as in `Paths`.
            socket: socket
                .or_else(|| std::env::var_os("XY_SOCKET").map(PathBuf::from))
                .filter(|s| !s.as_os_str().is_empty()),
        }
    }

    /// The paths, with `--socket` applied and its length checked.
    pub(crate) fn paths(&self) -> Result<Paths, Failure> {
        let mut paths =
            Paths::from_env().map_err(|e| Failure::new(Exit::Unreachable, e.to_string()))?;
        if let Some(s) = &self.socket {
            paths.socket.clone_from(s);
        }
        paths
            .check_socket()
            .map_err(|e| Failure::new(Exit::Unreachable, e.to_string()))?;
        Ok(paths)
    }

    /// The socket override, for the spawned daemon's environment.
    pub(crate) fn socket_override(&self) -> Option<&PathBuf> {
        self.socket.as_ref()
    }
}
