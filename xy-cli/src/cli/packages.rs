//! The clap types of pinned installs (SPEC §22): `add`'s `--npm`/`--pypi`
//! flags, `upgrade` and `rollback`.

use std::time::Duration;

use clap::Args;

/// `add --npm/--pypi …`: install a pinned package and run its entry point.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct PinArgs {
    /// Install an npm package (`<pkg>[@<version|range|tag>]`, default
    /// `latest`) pinned by lockfile, and run its `bin` with `node`; the
    /// words after `--` become the server's extra arguments.
    #[arg(long, value_name = "PKG[@VER]", conflicts_with = "pypi")]
    pub(crate) npm: Option<String>,
    /// Install a PyPI package (`<pkg>[==<version>]`, default the newest)
    /// into a venv with hash-pinned wheels, and run its console script.
    #[arg(long, value_name = "PKG[==VER]", conflicts_with = "registry")]
    pub(crate) pypi: Option<String>,
    /// Install what an MCP Registry entry names: its npm or PyPI package,
    /// arguments and environment (secret variables become `secrets`
    /// placeholders to fill in). A `server.json` file, or a server's name
    /// in the registry (`io.github.owner/server[@version]`, or a word that
    /// matches one name).
    #[arg(long, value_name = "SERVER.JSON|NAME", conflicts_with = "npm")]
    pub(crate) registry: Option<String>,
    /// The MCP Registry `--registry <name>` looks in (default the official
    /// https://registry.modelcontextprotocol.io).
    #[arg(long, value_name = "URL", requires = "registry")]
    pub(crate) registry_url: Option<String>,
    #[command(flatten)]
    pub(crate) install: InstallFlags,
}

/// What every install asks: consent, age, scripts.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct InstallFlags {
    /// Install without asking (scripts); without it and without a terminal
    /// nothing is installed.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Refuse a version published less than this long ago (default: `min-age`
    /// in xy.kdl, else 3d).
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    pub(crate) min_age: Option<Duration>,
    /// Install a version however recently it was published.
    #[arg(long)]
    pub(crate) allow_fresh: bool,
    /// Let npm run the packages' install scripts (off by default: they run
    /// arbitrary code at install time, and MCP servers rarely need them).
    #[arg(long)]
    pub(crate) allow_scripts: bool,
}

/// `upgrade`.
#[derive(Debug, Clone, Args)]
pub(crate) struct UpgradeArgs {
    /// The server's name.
    pub(crate) name: String,
    /// The version (or range, tag) to install; default the newest.
    #[arg(long, value_name = "VER")]
    pub(crate) to: Option<String>,
    #[command(flatten)]
    pub(crate) install: InstallFlags,
}

fn parse_age(s: &str) -> Result<Duration, String> {
    xy_core::time::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}): e.g. 3d, 12h"))
}
