//! `xyctl import`, `xyctl clients` and `xyctl clients apply|undo` as clap
//! types: which AI client, which file, and whether to write.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::clients::ClientId;

/// A client's SPEC id, its possible values listed in `--help` and errors.
fn client_id() -> impl clap::builder::TypedValueParser<Value = ClientId> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(ClientId::ALL.map(ClientId::id))
        .map(|id: String| ClientId::from_id(&id).expect("one of the possible values"))
}

/// `import`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ImportArgs {
    /// The client whose servers to import.
    #[arg(value_parser = client_id())]
    pub(crate) client: ClientId,
    /// Show what would be created; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The client's config file (default: its usual place on this OS).
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<PathBuf>,
    /// Write no starter `sandbox { }` blocks: the servers run with your
    /// full rights.
    #[arg(long)]
    pub(crate) no_sandbox: bool,
    /// Turn `npx -y <pkg>` / `uvx <pkg>` entries into pinned installs (as
    /// `xyctl add --npm/--pypi` does; one confirmation for all of them).
    #[arg(long)]
    pub(crate) pin: bool,
    #[command(flatten)]
    pub(crate) install: crate::cli::InstallFlags,
    /// SPEC §25: how long to wait for the servers to list their tools or fail.
    #[command(flatten)]
    pub(crate) wait: crate::cli::WaitFlag,
}

/// `clients`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct ClientsArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) action: Option<ClientsCmd>,
}

/// `clients apply|undo`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ClientsCmd {
    /// Point the client's entries for servers xy runs at xy (backup first).
    Apply {
        /// The client.
        #[arg(value_parser = client_id())]
        client: ClientId,
        /// Print the change as a unified diff; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// The client's config file (default: its usual place on this OS).
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        /// Also add an `xy` entry running `<xyctl> mcp`, so the client's
        /// agent can see and restart its servers (SPEC §17).
        #[arg(long)]
        with_xy: bool,
        /// Write ONE entry pointing at the aggregate (the gateway's `/mcp`,
        /// every server's tools) and remove the entries that stand for
        /// servers xy runs (SPEC §26).
        #[arg(long)]
        one: bool,
        /// With `--one`: point at this profile's `/p/<profile>/mcp`.
        #[arg(long, value_name = "PROFILE", requires = "one")]
        profile: Option<String>,
    },
    /// Restore the newest backup `clients apply` made of the client's file.
    Undo {
        /// The client.
        #[arg(value_parser = client_id())]
        client: ClientId,
        /// The client's config file (default: its usual place on this OS).
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
    },
}
