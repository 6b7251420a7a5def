//! `xyctl tools <name>` and `xyctl tools approve|deny|review|search` as
//! clap types (SPEC §20, §26): which server, which tools, which query.

use clap::{Args, Subcommand};

/// `tools`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct ToolsArgs {
    /// The server's name (its config file stem).
    #[arg(required = true)]
    pub(crate) name: Option<String>,
    /// Print the daemon's JSON result unchanged, on one line.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) action: Option<ToolsCmd>,
}

/// `tools approve|deny|review`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ToolsCmd {
    /// Let held-back tools (or prompts) through to clients.
    #[command(arg_required_else_help = true)]
    Approve {
        /// The server.
        name: String,
        /// The tools to approve.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        tools: Vec<String>,
        /// Approve every held-back tool of the server.
        #[arg(long)]
        all: bool,
    },
    /// Hold tools back from clients until they are approved.
    #[command(arg_required_else_help = true)]
    Deny {
        /// The server.
        name: String,
        /// The tools to deny.
        #[arg(required = true)]
        tools: Vec<String>,
    },
    /// Rank every visible tool for a query, as the aggregate's
    /// `find_tools` would answer it (SPEC §26).
    #[command(arg_required_else_help = true)]
    Search {
        /// What the tool should do, in a few words.
        query: String,
        /// Only this server's tools.
        #[arg(long)]
        server: Option<String>,
        /// At most this many tools (default 8, at most 50).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// Rank what this profile's endpoint offers (default: `/mcp`'s).
        #[arg(long)]
        profile: Option<String>,
        /// Print the daemon's JSON result unchanged, on one line.
        #[arg(long)]
        json: bool,
    },
    /// Go through held-back tools one by one: what changed, then approve,
    /// deny or skip each.
    Review {
        /// Only this server (default: every server).
        name: Option<String>,
    },
}
