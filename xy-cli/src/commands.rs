//! One module per subcommand, and the dispatch from the parsed command line
//! to them. The context they share is [`crate::ctx::Ctx`].

use std::time::Duration;

use crate::cli::Command;
use crate::ctx::Ctx;
use crate::error::{Exit, Failure};

pub(crate) mod add;
pub(crate) mod auth;
pub(crate) mod calls;
pub(crate) mod clients;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod connect;
pub(crate) mod control;
pub(crate) mod daemon;
pub(crate) mod events;
pub(crate) mod list;
pub(crate) mod logs;
pub(crate) mod outcome;
pub(crate) mod reload;
pub(crate) mod sandbox;
pub(crate) mod service;
pub(crate) mod status;
pub(crate) mod tools;
pub(crate) mod ui;
pub(crate) mod upgrade;

/// Runs one subcommand.
pub(crate) fn run(cmd: Command, ctx: &Ctx) -> Result<Exit, Failure> {
    match cmd {
        Command::List(j) => list::run(ctx, j.json),
        Command::Status {
            name,
            verbose,
            json,
        } => status::run(ctx, &name, verbose, json.json),
        Command::Tools(args) => tools::run(ctx, args),
        Command::Start { targets, wait } => {
            control::run(ctx, control::Action::Start, &targets, wait.duration())
        }
        Command::Stop(t) => control::run(ctx, control::Action::Stop, &t, Duration::ZERO),
        Command::Restart { targets, wait } => {
            control::run(ctx, control::Action::Restart, &targets, wait.duration())
        }
        Command::Reload(j) => reload::run(ctx, j.json),
        Command::Logs(args) => logs::run(ctx, &args),
        Command::Events(args) => events::run(ctx, &args),
        Command::Calls(args) => calls::run(ctx, &args),
        Command::Top => crate::top::run(ctx),
        Command::Ui { print_url } => ui::run(ctx, print_url),
        Command::Daemon(cmd) => daemon::run(ctx, &cmd),
        Command::Config(cmd) => config::run(ctx, cmd),
        Command::Service(cmd) => service::run(ctx, cmd),
        Command::Add(args) => add::run(ctx, &args),
        Command::Remove { name } => add::remove(ctx, &name),
        Command::Upgrade(args) => upgrade::upgrade(ctx, &args),
        Command::Rollback { name } => upgrade::rollback(ctx, &name),
        Command::Import(args) => clients::import(ctx, &args),
        Command::Clients(args) => clients::run(ctx, &args),
        Command::Connect { name, one, profile } => {
            connect::run(ctx, name.as_deref(), one, profile.as_deref())
        }
        Command::Mcp => crate::mcp::run(ctx),
        Command::Sandbox(cmd) => sandbox::run(ctx, &cmd),
        Command::Auth(cmd) => auth::run(ctx, &cmd),
        Command::Completions { shell } => completions::run(shell),
    }
}
