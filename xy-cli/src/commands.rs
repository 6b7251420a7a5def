//! One module per subcommand, and the context they share: resolved paths,
//! the output styles, and whether detect-or-spawn may start a daemon.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use xy_core::paths::Paths;

use crate::cli::{Cli, ColorChoice, Command};
use crate::error::{Exit, Failure};
use crate::render::Style;

pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod control;
pub(crate) mod daemon;
pub(crate) mod list;
pub(crate) mod logs;
pub(crate) mod reload;
pub(crate) mod service;
pub(crate) mod status;

/// How long a read-only call (`list`, `status`, `daemon_status`) may take
/// before the daemon counts as wedged.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `start`/`stop`/`restart`/`reload` may take: a stop waits for the
/// children's grace periods, so this is generous.
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(120);

/// What every command may need.
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

/// Runs one subcommand.
pub(crate) fn run(cmd: Command, ctx: &Ctx) -> Result<Exit, Failure> {
    match cmd {
        Command::List(j) => list::run(ctx, j.json),
        Command::Status { name, json } => status::run(ctx, &name, json.json),
        Command::Start(t) => control::run(ctx, control::Action::Start, &t),
        Command::Stop(t) => control::run(ctx, control::Action::Stop, &t),
        Command::Restart(t) => control::run(ctx, control::Action::Restart, &t),
        Command::Reload(j) => reload::run(ctx, j.json),
        Command::Logs(args) => logs::run(ctx, &args),
        Command::Daemon(cmd) => daemon::run(ctx, &cmd),
        Command::Config(cmd) => config::run(ctx, cmd),
        Command::Service(cmd) => service::run(ctx, cmd),
        Command::Completions { shell } => completions::run(shell),
    }
}
