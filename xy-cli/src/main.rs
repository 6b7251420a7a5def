//! `xyctl`: the thin client of xyd. Parses the command line, runs one
//! command, prints through `output`, and exits with the code SPEC §8 fixes
//! (0 ok, 1 operational error, 2 daemon unreachable, 3 config invalid).

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
