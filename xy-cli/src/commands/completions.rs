//! `xyctl completions <bash|zsh|fish>`.

use clap::CommandFactory;

use crate::cli::{Cli, Shell};
use crate::error::{Exit, Failure};
use crate::output;

pub(crate) fn run(shell: Shell) -> Result<Exit, Failure> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "xyctl", &mut buf);
    output::stdout_bytes(&buf);
    Ok(Exit::Success)
}
