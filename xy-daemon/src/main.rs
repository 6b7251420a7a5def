//! `xyd`: parses flags, takes the lock, sets up logging and hands over to
//! [`xy_daemon::run`]. Exit codes: 0 clean, 1 operational, 3 invalid config.

use std::path::PathBuf;
use std::process::ExitCode;

use xy_core::paths::Paths;
use xy_daemon::{DaemonError, boot, logging, prepare, signals};

use xy_daemon::heap;

/// What `xyd --help` prints.
const HELP: &str = "\
xyd: keeps your local MCP servers running.

Reads one KDL file per server from the config directory, starts them all,
and serves newline-delimited JSON-RPC on a Unix socket (see `xyctl`).

Usage: xyd [OPTIONS]

Options:
      --config-dir <DIR>  Directory of `<name>.kdl` server configs
                          [default: $XDG_CONFIG_HOME/xy/servers]
      --foreground        Run in the foreground (the default and only mode;
                          accepted for service managers that pass it)
  -h, --help              Print help
  -V, --version           Print version
";

/// The daemon's flags. Parsed with `lexopt`, not clap: xyd has two flags,
/// and clap's parser is ~0.2 MB of code every running daemon would keep
/// resident (D40). `xyctl`, the command people type, keeps clap.
#[derive(Debug, Default, PartialEq)]
struct Args {
    config_dir: Option<PathBuf>,
    foreground: bool,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Cli {
    Run(Args),
    Help,
    Version,
}

/// `args` without the program name.
fn parse_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, lexopt::Error> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut out = Args::default();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("config-dir") => out.config_dir = Some(parser.value()?.into()),
            Long("foreground") => out.foreground = true,
            Short('h') | Long("help") => return Ok(Cli::Help),
            Short('V') | Long("version") => return Ok(Cli::Version),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Cli::Run(out))
}

#[allow(clippy::print_stdout, clippy::print_stderr)]
fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // `sandbox_test`'s confined probe child (hidden; no lock, no log).
    if let Some(grandchild) = xy_daemon::probe::requested(&argv) {
        return xy_daemon::probe::main(grandchild);
    }
    heap::limit_malloc_arenas();
    let args = match parse_args(argv) {
        Ok(Cli::Run(args)) => args,
        Ok(Cli::Help) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Cli::Version) => {
            println!("xyd {}", xy_core::VERSION);
            return ExitCode::SUCCESS;
        }
        // Usage errors exit 2, as clap's do for xyctl.
        Err(e) => {
            eprintln!(
                "xyd: {e}\n\nUsage: xyd [--config-dir <DIR>] [--foreground]\nFor more information, try '--help'."
            );
            return ExitCode::from(2);
        }
    };
    let _ = args.foreground;
    match boot(args) {
        // A second signal's kill let the graceful path end first.
        Ok(()) if signals::forced() => ExitCode::from(130),
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e);
            ExitCode::from(e.exit_code())
        }
    }
}

fn boot(args: Args) -> Result<(), DaemonError> {
    let mut paths = Paths::from_env()?;
    match args.config_dir {
        // Named explicitly: a missing directory stays a config error (exit 3).
        Some(dir) => paths = paths.with_config_dir(absolute(dir)),
        // First run: the default directory is created, and xyd boots empty.
        None => boot::create_default_config_dir(&paths.config_dir)?,
    }
    let prepared = prepare(paths)?;
    let _log = logging::init(prepared.paths())?;
    heap::start_trimmer();
    // One async thread (D45): xyd's work per event is small and the children
    // need the other cores; a second worker only added cross-thread wake-ups
    // (CPU per bridged request 86 → 62 µs) and tokio's multi-thread scheduler
    // (whose poll-time average alone kept libm mapped).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("xyd")
        .build()
        .map_err(|source| DaemonError::Io {
            action: "start the async runtime",
            path: PathBuf::new(),
            source,
        })?;
    let result = runtime.block_on(async move {
        let reloads = signals::hangups();
        let run_dir = prepared.paths().run_dir.clone();
        xy_daemon::run(prepared, signals::shutdown_requested(run_dir), reloads).await
    });
    if let Err(e) = &result
        && !matches!(e, DaemonError::Config(_))
    {
        // Config errors were already logged with their diagnostics.
        tracing::error!("{e}");
    }
    // The children are gone and their pumps have read their last lines:
    // those lines reach the files before we exit (a hung file aside).
    if !xy_actors::flush_logs(std::time::Duration::from_secs(2)) {
        tracing::warn!("some log lines were not written to their files before exit");
    }
    // Children are gone; don't wait for blocking tasks of a wedged actor.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

/// A relative `--config-dir` is taken from the cwd at start, which a service
/// manager may change later.
fn absolute(dir: PathBuf) -> PathBuf {
    std::path::absolute(&dir).unwrap_or(dir)
}

/// The one place `xyd` prints: the fatal error, also when the log could not
/// be set up. (Config diagnostics already went to stderr through tracing.)
#[allow(clippy::print_stderr)]
fn report(e: &DaemonError) {
    eprintln!("xyd: {e}");
}

#[cfg(test)]
mod tests {
    use super::{Args, Cli, parse_args};

    fn parse(args: &[&str]) -> Result<Cli, String> {
        parse_args(args.iter().map(|a| a.into())).map_err(|e| e.to_string())
    }

    #[test]
    fn flags_parse_in_both_spellings() {
        assert_eq!(parse(&[]), Ok(Cli::Run(Args::default())));
        let want = Cli::Run(Args {
            config_dir: Some("/tmp/c".into()),
            foreground: true,
        });
        assert_eq!(parse(&["--config-dir", "/tmp/c", "--foreground"]), Ok(want));
        let Ok(Cli::Run(a)) = parse(&["--config-dir=/tmp/d"]) else {
            panic!("--config-dir=DIR")
        };
        assert_eq!(a.config_dir, Some("/tmp/d".into()));
        assert_eq!(parse(&["-V"]), Ok(Cli::Version));
        assert_eq!(parse(&["--help"]), Ok(Cli::Help));
    }

    #[test]
    fn usage_mistakes_name_the_flag() {
        let e = parse(&["--bogus"]).unwrap_err();
        assert!(e.contains("--bogus"), "{e}");
        let e = parse(&["--config-dir"]).unwrap_err();
        assert!(e.contains("--config-dir"), "{e}");
        let e = parse(&["stray"]).unwrap_err();
        assert!(e.contains("stray"), "{e}");
    }
}
