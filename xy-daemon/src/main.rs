//! `xyd`: parses flags, takes the lock, sets up logging and hands over to
//! [`xy_daemon::run`]. Exit codes: 0 clean, 1 operational, 3 invalid config.

use std::path::PathBuf;
use std::process::ExitCode;

use xy_core::paths::Paths;
use xy_daemon::{DaemonError, boot, logging, prepare, signals};

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
    limit_malloc_arenas();
    let args = match parse_args(std::env::args_os().skip(1)) {
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
    start_heap_trimmer();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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

/// glibc gives every thread that allocates an arena of its own (up to 8 per
/// core), each keeping the pages it freed. The daemon's allocations are
/// small and its threads few and mostly idle: two arenas are enough, and an
/// idle daemon keeps ~1 MiB less at N=200 (docs/performance.md, issue 13).
/// `MALLOC_ARENA_MAX` in the environment still decides if set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: called first in `main`, before any other thread exists;
        // `mallopt` only sets an allocator parameter.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

/// When the daemon gives freed heap pages back (D43): 10 and 20 s after it
/// starts (the boot's burst), then 40 and 80 s, then every 64 s. Never two
/// trims within 10 s: an idle daemon wakes at most once per 10 s (issue 8's
/// target), and once a minute for good.
fn trim_delays() -> impl Iterator<Item = std::time::Duration> {
    [10, 10, 20, 40]
        .into_iter()
        .chain(std::iter::repeat(64))
        .map(std::time::Duration::from_secs)
}

/// glibc returns freed memory to the system only from the top of a heap:
/// pages freed between live allocations (the boot's burst of spawns, port
/// checks and tool lists; a flood's buffers) stay resident for good. A
/// thread of its own calls `malloc_trim(0)` on the schedule of
/// [`trim_delays`] (0.4–0.8 ms at N=200, kept off the async workers): at
/// N=200 probed servers idle RSS 16.8 → 14.5 MiB (D43, docs/performance.md).
/// macOS's allocator returns free pages by itself.
fn start_heap_trimmer() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("xyd-heap".into())
        .spawn(move || {
            for delay in trim_delays() {
                std::thread::sleep(delay);
                let started = std::time::Instant::now();
                let released = trim_heap();
                let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tracing::debug!(released, took_us, "heap trimmed");
            }
        });
    if let Err(e) = spawned {
        // Only memory is at stake: run without.
        tracing::warn!("could not start the heap trimmer: {e}");
    }
}

/// Gives every page that lies wholly in freed heap memory back to the
/// system; true if any was.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() -> bool {
    // SAFETY: `malloc_trim` takes each arena's lock itself and only
    // releases pages that no allocation uses; it is safe from any thread.
    #[allow(unsafe_code)]
    let released = unsafe { libc::malloc_trim(0) };
    released == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() -> bool {
    false
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
    #[test]
    fn trims_never_come_twice_within_ten_seconds() {
        let secs: Vec<u64> = super::trim_delays().take(7).map(|d| d.as_secs()).collect();
        assert_eq!(secs, [10, 10, 20, 40, 64, 64, 64]);
        assert!(super::trim_delays().take(100).all(|d| d.as_secs() >= 10));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_gives_freed_pages_between_live_blocks_back() {
        fn resident_kib() -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse().unwrap()
        }
        // 16 MiB in 64 KiB blocks below the mmap threshold's reach of a
        // single block, each page written; then every other block freed,
        // so the freed pages sit between live ones, not at the heap's top.
        let mut blocks: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 60 * 1024]).collect();
        let mut kept = Vec::new();
        for (i, b) in blocks.drain(..).enumerate() {
            if i % 2 == 0 {
                kept.push(b);
            }
        }
        let before = resident_kib();
        assert!(super::trim_heap(), "malloc_trim released nothing");
        let after = resident_kib();
        assert!(
            after + 4 * 1024 <= before,
            "expected ≥ 4 MiB back, RSS {before} → {after} KiB"
        );
        assert_eq!(kept.len(), 128);
        assert!(kept.iter().enumerate().all(|(i, b)| b[0] == (2 * i) as u8));
    }

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
