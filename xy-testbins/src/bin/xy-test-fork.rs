//! `xy-test-fork`: a child that forks a grandchild in its own process group.
//! The grandchild ignores SIGTERM and sleeps forever; the parent exits 0 on
//! SIGTERM or on its own after `--parent-exit-ms`, leaving the grandchild.
//! With `--daemonise PATH` the grandchild is a daemon instead: a double fork
//! whose middle process calls `setsid` and exits, so the grandchild is in
//! no group or session of the parent's and has lost its parent; it writes
//! its pid to PATH, ignores SIGTERM and sleeps forever. `--breed N` makes
//! that daemon fork N more (one every 5 ms, each in a session of its own,
//! each pid written to `PATH.breed/`), so a stop meets forks under way.

use std::time::Duration;

use xy_testbins::args::Args;
use xy_testbins::out::{err, out};
use xy_testbins::sys;

const USAGE: &str =
    "xy-test-fork [--parent-exit-ms N] [--pidfile PATH] [--daemonise PATH [--breed N]]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut parent_exit_ms: Option<u64> = None;
    let mut pidfile: Option<std::path::PathBuf> = None;
    let mut daemon_pidfile: Option<std::path::PathBuf> = None;
    let mut breed: u32 = 0;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--parent-exit-ms" => parent_exit_ms = Some(args.value(&flag)),
            "--pidfile" => pidfile = Some(args.value::<String>(&flag).into()),
            "--daemonise" => daemon_pidfile = Some(args.value::<String>(&flag).into()),
            "--breed" => breed = args.value(&flag),
            _ => args.unknown(&flag),
        }
    }

    // Blocked before the fork so neither process has a window where SIGTERM
    // would take its default action.
    let sigterm = sys::block_sigterm();
    if let Some(path) = &daemon_pidfile {
        // Said before the daemon exists: once its pidfile is there, the
        // parent writes nothing more until SIGTERM (no SIGPIPE if xyd died).
        out(&format!("parent pid={}", std::process::id()));
        daemonise(path, breed);
        wait_then_exit(parent_exit_ms, &sigterm);
    }
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
        write_pid(path, grandchild.as_raw());
    }
    out(&format!("parent pid={}", std::process::id()));
    wait_then_exit(parent_exit_ms, &sigterm);
}

/// Write then rename, so a reader never sees a partial pid.
fn write_pid(path: &std::path::Path, pid: i32) {
    let tmp = path.with_extension("tmp");
    let written =
        std::fs::write(&tmp, format!("{pid}\n")).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        err(&format!("cannot write pidfile {}: {e}", path.display()));
        std::process::exit(1);
    }
}

/// The classic daemon: fork, `setsid` in the middle process, fork again and
/// let the middle one exit (reaped here), so the grandchild is orphaned
/// outside the parent's group and session. Returns in the parent only.
fn daemonise(path: &std::path::Path, breed: u32) {
    match sys::fork_single_threaded() {
        Ok(Some(middle)) => {
            let _ = nix::sys::wait::waitpid(middle, None);
        }
        Ok(None) => {
            if let Err(e) = nix::unistd::setsid() {
                err(&format!("setsid failed: {e}"));
                std::process::exit(1);
            }
            match sys::fork_single_threaded() {
                Ok(Some(_)) => std::process::exit(0),
                Ok(None) => {
                    sys::ignore_sigterm();
                    write_pid(path, i32::try_from(std::process::id()).unwrap_or_default());
                    if breed > 0 {
                        breed_from(path, breed);
                    }
                    sys::sleep_forever();
                }
                Err(e) => {
                    err(&format!("fork failed: {e}"));
                    std::process::exit(1);
                }
            }
        }
        Err(e) => {
            err(&format!("fork failed: {e}"));
            std::process::exit(1);
        }
    }
}

/// Forks `n` sleepers, one every 5 ms, each in a new session; both sides
/// write the new pid to `<path>.breed/<pid>` (the child may be stopped
/// before it can).
fn breed_from(path: &std::path::Path, n: u32) {
    let dir = path.with_extension("breed");
    let _ = std::fs::create_dir_all(&dir);
    let mark = |pid: u32| {
        let _ = std::fs::write(dir.join(pid.to_string()), "");
    };
    for _ in 0..n {
        match sys::fork_single_threaded() {
            Ok(Some(child)) => mark(child.as_raw().unsigned_abs()),
            Ok(None) => {
                let _ = nix::unistd::setsid();
                mark(std::process::id());
                sys::sleep_forever();
            }
            Err(_) => return,
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_then_exit(parent_exit_ms: Option<u64>, sigterm: &nix::sys::signal::SigSet) -> ! {
    if let Some(ms) = parent_exit_ms {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            out(&format!("parent exiting after {ms} ms"));
            std::process::exit(0);
        });
    }
    sys::wait_sigterm(sigterm);
    out("got SIGTERM, exiting");
    std::process::exit(0);
}
