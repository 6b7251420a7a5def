//! `xyctl add` as clap types: the server's name, port, transport, env and
//! command line as the user types them.

use std::path::PathBuf;

use clap::Args;

use crate::server_file::Health;

/// `add`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AddArgs {
    /// The server's name (`[A-Za-z0-9_.-]+`); the file is `<name>.kdl`.
    pub(crate) name: String,
    /// The port (for a stdio server: the port xy serves it on). Default:
    /// the first free port from 8400 that no other config uses. `{port}`
    /// in the arguments is replaced by it.
    #[arg(long, value_name = "P")]
    pub(crate) port: Option<u16>,
    /// The server speaks MCP over stdin/stdout; xy serves it over HTTP.
    #[arg(long)]
    pub(crate) stdio: bool,
    /// An environment variable for the server (repeatable).
    #[arg(long = "env", value_name = "K=V", value_parser = parse_env)]
    pub(crate) env: Vec<(String, String)>,
    /// The directory the server runs in.
    #[arg(long, value_name = "D")]
    pub(crate) working_dir: Option<PathBuf>,
    /// A health probe: mcp, tcp or http:/path.
    #[arg(long, value_name = "PROBE")]
    pub(crate) health: Option<Health>,
    /// Add the server stopped: its file says `autostart #false`, so boot
    /// and reload leave it stopped until `xyctl start`.
    #[arg(long)]
    pub(crate) no_start: bool,
    /// Replace an existing config of that name.
    #[arg(long)]
    pub(crate) force: bool,
    /// Write no starter `sandbox { }` block: the server runs with your
    /// full rights.
    #[arg(long)]
    pub(crate) no_sandbox: bool,
    /// A remote server (SPEC §23): xy serves this `https://` URL (plain
    /// `http://` only on loopback) at the port and the gateway; no command.
    #[arg(long, value_name = "URL", conflicts_with_all = ["stdio", "env", "working_dir", "health", "npm", "pypi", "registry"])]
    pub(crate) url: Option<String>,
    /// With `--url`: a header for every request, `'Name: value'`
    /// (repeatable; written into the file as it is).
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "url", value_parser = parse_header)]
    pub(crate) header: Vec<(String, String)>,
    /// With `--url`: a header whose value is the §16 secret SECRET,
    /// `Name=SECRET` (repeatable); a `secrets { SECRET file="…" }`
    /// placeholder is written for you to fill in.
    #[arg(long = "header-secret", value_name = "NAME=SECRET", requires = "url", value_parser = parse_env)]
    pub(crate) header_secret: Vec<(String, String)>,
    /// SPEC §25: how long to wait for the server to list its tools or fail.
    #[command(flatten)]
    pub(crate) wait: super::WaitFlag,
    /// SPEC §22: `--npm`/`--pypi` and their install flags.
    #[command(flatten)]
    pub(crate) pin: super::packages::PinArgs,
    /// The command and its arguments, after `--` (with `--npm`/`--pypi`/`--registry`:
    /// extra arguments for the installed entry point).
    #[arg(last = true, required_unless_present_any = ["npm", "pypi", "registry", "url"], value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(format!("`{s}` is not 'Name: value'")),
    }
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not K=V")),
    }
}
