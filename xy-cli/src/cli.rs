//! The command line as clap types: every subcommand, its arguments and the
//! global flags. Nothing here runs anything; `commands` does.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod add;
mod clients;
mod packages;
mod service;
mod tools;

pub(crate) use add::AddArgs;
pub(crate) use clients::{ClientsArgs, ClientsCmd, ImportArgs};
pub(crate) use packages::{InstallFlags, UpgradeArgs};
#[cfg(test)]
pub(crate) use service::StatusArgs;
pub(crate) use service::{InstallArgs, ServiceCmd};
pub(crate) use tools::{ToolsArgs, ToolsCmd};

/// Default `logs --tail`: about a screenful per server.
pub(crate) const DEFAULT_TAIL: u32 = 50;

/// `--wait`'s default: long enough for a Node or Python server to start
/// and answer its first `tools/list`, and past the 10 s within which
/// SPEC §25 wants a failure named.
pub(crate) const DEFAULT_WAIT_SECS: u64 = 15;

/// Control xyd, the per-user supervisor of local MCP servers (stdio and HTTP).
///
/// xyctl talks to xyd over its Unix socket and starts xyd when it is not
/// running (see --no-spawn).
#[derive(Debug, Parser)]
#[command(name = "xyctl", version, propagate_version = true)]
pub(crate) struct Cli {
    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub(crate) color: ColorChoice,

    /// Never start xyd; fail with exit code 2 when it is not running.
    #[arg(long, global = true, env = "XY_NO_SPAWN", value_parser = clap::builder::FalseyValueParser::new())]
    pub(crate) no_spawn: bool,

    /// The daemon's socket [env: XY_SOCKET] (default:
    /// $XDG_RUNTIME_DIR/xy.sock, else $XDG_STATE_HOME/xy/xy.sock).
    // Not clap's `env`: an empty XY_SOCKET means unset (as in `Paths`), which
    // clap would reject as a missing value.
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    /// Colour when writing to a terminal and NO_COLOR is not set.
    Auto,
    /// Always colour, even into a pipe or with NO_COLOR.
    Always,
    /// Never colour.
    Never,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show every configured server and its state.
    List(JsonFlag),
    /// Show one server in detail: settings, sandbox, transitions, recent log lines.
    Status {
        /// The server's name (its config file stem).
        name: String,
        /// List every sandbox path, the system ones included.
        #[arg(long, short = 'v')]
        verbose: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show a server's tools, which the firewall holds back and why, and what
    /// changed since the start before; approve, deny or review them.
    Tools(ToolsArgs),
    /// Start servers, and wait until each has listed its tools or failed.
    Start {
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        wait: WaitFlag,
    },
    /// Stop servers (SIGTERM, then SIGKILL after the grace period).
    Stop(Targets),
    /// Stop and start servers again (starts stopped or failed ones), and
    /// wait until each has listed its tools or failed.
    Restart {
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        wait: WaitFlag,
    },
    /// Re-read the config directory: start added, stop removed, restart changed.
    Reload(JsonFlag),
    /// Print servers' log lines; with no name, every server's, prefixed.
    Logs(LogsArgs),
    /// Print state, health, tools and config changes as they happen, until Ctrl-C.
    Events(EventsArgs),
    /// Show the recorded tool calls (time, client, tool, duration, outcome;
    /// never arguments), oldest first; `-f` keeps printing new ones.
    Calls(CallsArgs),
    /// Full-screen dashboard: every server live, its logs, start/stop/restart.
    Top,
    /// Open the console in the browser: a one-time link to xyd's local page
    /// (review queue, servers, calls, logs, clients).
    Ui {
        /// Print the link instead of opening a browser (for a browser
        /// elsewhere, through an SSH tunnel to the console's port).
        #[arg(long)]
        print_url: bool,
    },
    /// Start, stop or inspect the daemon itself.
    #[command(subcommand)]
    Daemon(DaemonCmd),
    /// Work with config files (no daemon needed).
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Manage the start-on-login service (launchd agent on macOS, systemd
    /// user unit on Linux).
    #[command(subcommand)]
    Service(ServiceCmd),
    /// Add a server: write its config file, reload, print its state and URL.
    Add(Box<AddArgs>),
    /// Install a newer version of a pinned server beside the current one,
    /// switch its config to it and restart it (the last two are kept).
    Upgrade(UpgradeArgs),
    /// Switch a pinned server back to the other installed version.
    Rollback {
        /// The server's name.
        name: String,
    },
    /// Stop a server and move its config file to `<config dir>/.removed/`.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Turn an AI client's stdio servers into xy servers of the same name.
    Import(ImportArgs),
    /// Show the AI clients found here, and which entries point at xy.
    Clients(ClientsArgs),
    /// Bridge stdin/stdout to a server's xy endpoint (for clients that only
    /// launch stdio servers).
    Connect {
        /// The server's name.
        #[arg(required_unless_present = "one", conflicts_with = "one")]
        name: Option<String>,
        /// The aggregate instead: every server's tools at the gateway's
        /// `/mcp` (SPEC §26).
        #[arg(long)]
        one: bool,
        /// With `--one`: the profile's endpoint, `/p/<profile>/mcp`.
        #[arg(long, value_name = "PROFILE", requires = "one")]
        profile: Option<String>,
    },
    /// Serve MCP on stdin/stdout so an AI agent can see its tool servers'
    /// state and logs, and restart those whose config allows it.
    Mcp,
    /// Check a server's sandbox: run the exfiltration probes under its
    /// rules and show what gets through.
    #[command(subcommand)]
    Sandbox(SandboxCmd),
    /// Log in to a remote server's OAuth authorization server once, for
    /// every client; show or forget the grant.
    #[command(subcommand)]
    Auth(AuthCmd),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// `--json`.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct JsonFlag {
    /// Print the daemon's JSON result unchanged, on one line.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--wait` (SPEC §25): how long `add`, `import`, `start` and `restart`
/// wait for each server to list its tools or fail.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct WaitFlag {
    /// Seconds to wait for each server to list its tools or fail before
    /// saying what it does; 0 prints the state at once.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_WAIT_SECS)]
    pub(crate) wait: u64,
}

impl WaitFlag {
    /// The wait as a duration.
    pub(crate) fn duration(self) -> std::time::Duration {
        std::time::Duration::from_secs(self.wait)
    }
}

/// Which servers `start`/`stop`/`restart` act on.
#[derive(Debug, Clone, Args)]
pub(crate) struct Targets {
    /// Server names.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub(crate) names: Vec<String>,
    /// Every configured server.
    #[arg(long)]
    pub(crate) all: bool,
}

/// `logs`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LogsArgs {
    /// Servers to show; none means every server.
    pub(crate) names: Vec<String>,
    /// Buffered lines to print first, per server.
    #[arg(long, short = 'n', value_name = "N", default_value_t = DEFAULT_TAIL)]
    pub(crate) tail: u32,
    /// Keep printing new lines until Ctrl-C.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
}

/// `events`.
#[derive(Debug, Clone, Args)]
pub(crate) struct EventsArgs {
    /// Servers to watch; none means every server (also ones added later).
    pub(crate) names: Vec<String>,
    /// One JSON object per line: the `event` notifications' params, verbatim.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `calls`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CallsArgs {
    /// Only this server's calls; none means every server's.
    pub(crate) name: Option<String>,
    /// Keep printing new calls until Ctrl-C.
    #[arg(long, short = 'f')]
    pub(crate) follow: bool,
    /// The newest N calls first (at most 10000).
    #[arg(long, short = 'n', value_name = "N", default_value_t = xy_core::protocol::CALLS_DEFAULT_LIMIT)]
    pub(crate) limit: u32,
    /// The daemon's JSON: the `calls` result on one line, then with `-f`
    /// one `call` notification's params per line.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `daemon …`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum DaemonCmd {
    /// Start xyd (through the login service if one is installed).
    Start,
    /// Ask xyd to stop every server and exit; wait until it is gone.
    Stop,
    /// Stop xyd, then start it again.
    Restart {
        /// Kill a daemon that holds the lock but does not answer (after
        /// checking that the pid really is an xyd).
        #[arg(long)]
        force: bool,
    },
    /// Show xyd's version, pid, uptime and paths (exit 2 if not running).
    Status(JsonFlag),
}

/// `config …`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ConfigCmd {
    /// Validate a config directory and print every problem found.
    Check {
        /// The directory (default: $XDG_CONFIG_HOME/xy/servers).
        dir: Option<PathBuf>,
        /// Print `{valid, servers, warnings, errors}` as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `auth …`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum AuthCmd {
    /// Open the browser at the server's authorization page and wait until
    /// the login completes (Ctrl-C stops waiting).
    Login {
        /// The server's name.
        name: String,
        /// Print the URL instead of opening a browser (headless machines,
        /// SSH sessions).
        #[arg(long)]
        no_browser: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show each OAuth server's grant: logged in (issuer, scopes, expiry),
    /// not logged in, or login needed.
    Status {
        /// One server (default: every server with `auth { oauth }`).
        name: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Forget a server's grant (the tokens are deleted from the store).
    Logout {
        /// The server's name.
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// `sandbox …`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum SandboxCmd {
    /// Run the probes (read ~/.ssh, write ~/.bashrc, reach xy's state and
    /// socket, connect out, the same from a grandchild) in a child confined
    /// as the server's next spawn would be. Exit 0 when every outcome is
    /// what the rules say, 1 when one differs.
    Test {
        /// The server's name.
        name: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// Shells `completions` supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Shell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xyctl").chain(args.iter().copied()))
    }

    #[test]
    fn targets_need_names_or_all() {
        assert!(parse(&["start"]).is_err());
        assert!(parse(&["start", "a", "--all"]).is_err());
        let Command::Start { targets: t, wait } = parse(&["start", "a", "b"]).unwrap().command
        else {
            panic!("not start")
        };
        assert_eq!(t.names, ["a", "b"]);
        assert!(!t.all);
        assert_eq!(wait.wait, DEFAULT_WAIT_SECS);
        let Command::Stop(t) = parse(&["stop", "--all"]).unwrap().command else {
            panic!("not stop")
        };
        assert!(t.all && t.names.is_empty());
    }

    #[test]
    fn logs_defaults() {
        let Command::Logs(l) = parse(&["logs"]).unwrap().command else {
            panic!("not logs")
        };
        assert!(l.names.is_empty());
        assert_eq!(l.tail, DEFAULT_TAIL);
        assert!(!l.follow);
        let Command::Logs(l) = parse(&["logs", "a", "b", "-n", "5", "-f"]).unwrap().command else {
            panic!("not logs")
        };
        assert_eq!(l.names, ["a", "b"]);
        assert_eq!(l.tail, 5);
        assert!(l.follow);
    }

    #[test]
    fn global_flags_anywhere() {
        let cli = parse(&["list", "--json", "--color", "never", "--no-spawn"]).unwrap();
        assert_eq!(cli.color, ColorChoice::Never);
        assert!(cli.no_spawn);
        assert!(matches!(
            cli.command,
            Command::List(JsonFlag { json: true })
        ));
        let cli = parse(&["--socket", "/tmp/s", "daemon", "restart", "--force"]).unwrap();
        assert_eq!(cli.socket.as_deref(), Some(std::path::Path::new("/tmp/s")));
        assert!(matches!(
            cli.command,
            Command::Daemon(DaemonCmd::Restart { force: true })
        ));
    }

    #[test]
    fn auth_subcommands() {
        let Command::Auth(AuthCmd::Login {
            name, no_browser, ..
        }) = parse(&["auth", "login", "linear", "--no-browser"])
            .unwrap()
            .command
        else {
            panic!("not auth login")
        };
        assert_eq!(name, "linear");
        assert!(no_browser);
        let Command::Auth(AuthCmd::Status { name, json }) =
            parse(&["auth", "status", "--json"]).unwrap().command
        else {
            panic!("not auth status")
        };
        assert_eq!(name, None);
        assert!(json.json);
        assert!(parse(&["auth", "logout"]).is_err());
    }

    #[test]
    fn sandbox_test_and_status_verbose() {
        let Command::Sandbox(SandboxCmd::Test { name, json }) =
            parse(&["sandbox", "test", "notes", "--json"])
                .unwrap()
                .command
        else {
            panic!("not sandbox test")
        };
        assert_eq!(name, "notes");
        assert!(json.json);
        assert!(parse(&["sandbox", "test"]).is_err());
        let Command::Status { verbose, .. } = parse(&["status", "notes", "-v"]).unwrap().command
        else {
            panic!("not status")
        };
        assert!(verbose);
    }

    #[test]
    fn completions_shells() {
        assert!(parse(&["completions", "bash"]).is_ok());
        assert!(parse(&["completions", "zsh"]).is_ok());
        assert!(parse(&["completions", "fish"]).is_ok());
        assert!(parse(&["completions", "tcsh"]).is_err());
    }
}
