//! `xyctl`: the thin client of xyd. Parses the command line, runs one
//! command, prints through `output`, and exits with the code SPEC §8 fixes
//! (0 ok, 1 operational error, 2 daemon unreachable, 3 config invalid).
//! It links `xy-core` only (never the engine): everything a server does is
//! asked of xyd over its socket. What xyctl owns itself: spawning xyd,
//! writing server files, installing pinned packages, rewriting AI clients'
//! configs, the login service, and the stdio relay.
//!
//! # Layout
//!
//! The commands:
//! - `cli`: the command line as clap types; `commands`: one module per
//!   subcommand and the dispatch to them; `ctx`: what every command may
//!   need (styles, paths, timeouts).
//! - `top`: the full-screen dashboard; `mcp`: `xyctl mcp`, an MCP server
//!   for agents; `relay`: the stdio ↔ HTTP relay behind `xyctl connect`.
//!
//! What the commands share:
//! - `daemon_conn`: detect-or-spawn, where xyctl starts xyd; `process`:
//!   facts about other processes (alive, really `xyd`, lock holder, stop).
//! - `server_file`: server config files (render, port, validate, write,
//!   retire) and secret placeholders; `starter`: the starter `sandbox { }`
//!   block.
//! - `packages`: pinned installs (resolve, age check, plan, install;
//!   npm, PyPI, `server.json`); `clients`: AI clients' config files;
//!   `service`: start on login (LaunchAgent, systemd user unit).
//! - `render`: DTO to text, pure; `output`: the one writer to the
//!   terminal; `error`: exit codes and the one failure type; `http`: the
//!   one HTTP agent; `atomic_file`: the one way a kept file is replaced.

mod atomic_file;
mod cli;
mod clients;
mod commands;
mod ctx;
mod daemon_conn;
mod error;
mod http;
mod mcp;
mod output;
mod packages;
mod process;
mod relay;
mod render;
mod server_file;
mod service;
mod starter;
mod top;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;
use crate::ctx::Ctx;
use crate::error::Exit;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors exit 1, not clap's 2: 2 means "daemon unreachable"
            // to scripts. `--help` and `--version` exit 0.
            let code = if e.use_stderr() {
                Exit::Operational
            } else {
                Exit::Success
            };
            let _ = e.print();
            return code.into();
        }
    };
    let ctx = Ctx::new(&cli);
    match commands::run(cli.command, &ctx) {
        Ok(exit) => exit.into(),
        Err(failure) => {
            output::failure(&ctx.err, &failure);
            failure.exit.into()
        }
    }
}
