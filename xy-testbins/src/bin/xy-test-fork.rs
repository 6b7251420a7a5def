//! `xy-test-fork`: a child that forks a grandchild in its own process group.
//! The grandchild ignores SIGTERM and sleeps forever; the parent exits 0 on
//! SIGTERM or on its own after `--parent-exit-ms`, leaving the grandchild.

use std::time::Duration;

use xy_testbins::args::Args;
use xy_testbins::out::{err, out};
use xy_testbins::sys;

const USAGE: &str = "xy-test-fork [--parent-exit-ms N] [--pidfile PATH]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut parent_exit_ms: Option<u64> = None;
    let mut pidfile: Option<std::path::PathBuf> = None;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--parent-exit-ms" => parent_exit_ms = Some(args.value(&flag)),
            "--pidfile" => pidfile = Some(args.value::<String>(&flag).into()),
            _ => args.unknown(&flag),
        }
    }

    // Blocked before the fork so neither process has a window where SIGTERM
    // would take its default action.
    let sigterm = sys::block_sigterm();
    let grandchild = match sys::fork_single_threaded() {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            sys::ignore_sigterm();
            out(&format!("grandchild pid={}", std::process::id()));
            sys::sleep_forever();
        }
        Err(e) => {
            err(&format!("fork failed: {e}"));
            std::process::exit(1);
        }
    };

    if let Some(path) = &pidfile {
        // Write then rename, so a reader never sees a partial pid.
        let tmp = path.with_extension("tmp");
        let written = std::fs::write(&tmp, format!("{grandchild}\n"))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            err(&format!("cannot write pidfile {}: {e}", path.display()));
            std::process::exit(1);
        }
    }
    out(&format!("parent pid={}", std::process::id()));

    if let Some(ms) = parent_exit_ms {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            out(&format!("parent exiting after {ms} ms"));
            std::process::exit(0);
        });
    }
    sys::wait_sigterm(&sigterm);
    out("got SIGTERM, exiting");
    std::process::exit(0);
}
