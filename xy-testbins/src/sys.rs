//! The signal and process calls the child programs need: waiting for SIGTERM
//! synchronously (blocked + `sigwait`, no handler), ignoring it, dying by a
//! chosen signal, `fork`, and a stdio child on pipes for the bench tools.
//! The only `unsafe` of the crate lives here.

use std::time::Duration;

use nix::sys::signal::{SigHandler, SigSet, Signal};
use nix::unistd::Pid;

/// Blocks SIGTERM in the calling thread, so a later [`wait_sigterm`] receives
/// it. Call it in `main` before spawning threads: they inherit the mask, so no
/// thread is left where the default action could kill the process.
pub fn block_sigterm() -> SigSet {
    // A parent may have exec'd us with SIGTERM ignored; an ignored signal is
    // discarded and would never reach sigwait.
    set_disposition(Signal::SIGTERM, Disposition::Default);
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.thread_block().expect("block SIGTERM");
    set
}

/// Waits until SIGTERM (blocked by [`block_sigterm`]) arrives.
pub fn wait_sigterm(set: &SigSet) {
    loop {
        if let Ok(Signal::SIGTERM) = set.wait() {
            return;
        }
    }
}

/// Sets SIGTERM to `SIG_IGN` and unblocks it: it is then discarded on arrival.
pub fn ignore_sigterm() {
    set_disposition(Signal::SIGTERM, Disposition::Ignore);
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.thread_unblock().expect("unblock SIGTERM");
}

/// Kills the process with `signal` and its default action (core dump or
/// termination). Falls back to exit 1 for a signal whose default is to ignore.
pub fn die_by_signal(signal: Signal) -> ! {
    // std installs a SIGSEGV/SIGBUS handler for stack-overflow detection, which
    // would swallow a raised SIGSEGV: restore the default first.
    set_disposition(signal, Disposition::Default);
    let mut set = SigSet::empty();
    set.add(signal);
    let _ = set.thread_unblock();
    let _ = nix::sys::signal::raise(signal);
    std::process::exit(1);
}

/// Parses `SIGSEGV`, `segv`, `SEGV` or a number such as `11`.
pub fn parse_signal(name: &str) -> Option<Signal> {
    if let Ok(number) = name.parse::<i32>() {
        return Signal::try_from(number).ok();
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    full.parse().ok()
}

/// Sleeps forever (the process ends by a signal or another thread's exit).
pub fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `Some(child_pid)` in the parent, `None` in the child.
///
/// Call only while the process is single-threaded (before spawning any thread).
#[allow(unsafe_code)]
pub fn fork_single_threaded() -> std::io::Result<Option<Pid>> {
    // SAFETY: callers fork while the program is still single-threaded, so no
    // other thread can hold a lock (allocator, stdout) that the child would
    // inherit locked; the child may therefore use std freely.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { child }) => Ok(Some(child)),
        Ok(nix::unistd::ForkResult::Child) => Ok(None),
        Err(errno) => Err(errno.into()),
    }
}

#[derive(Debug, Clone, Copy)]
enum Disposition {
    Default,
    Ignore,
}

#[allow(unsafe_code)]
fn set_disposition(signal: Signal, disposition: Disposition) {
    let handler = match disposition {
        Disposition::Default => SigHandler::SigDfl,
        Disposition::Ignore => SigHandler::SigIgn,
    };
    // SAFETY: only SIG_DFL and SIG_IGN are installed, never a handler
    // function, so no code runs in signal context.
    let _ = unsafe { nix::sys::signal::signal(signal, handler) };
}

/// A child spawned with its stdin and stdout on pipes (stderr discarded):
/// the MCP stdio server the bench tools talk to.
pub struct StdioChild {
    pub child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
}

/// Spawns `cmd[0]` with the rest as arguments (see [`StdioChild`]).
pub fn spawn_stdio_child<S: AsRef<std::ffi::OsStr>>(cmd: &[S]) -> std::io::Result<StdioChild> {
    use std::process::{Command, Stdio};
    let (program, args) = cmd
        .split_first()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command"))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the child's pipes are missing"));
    };
    Ok(StdioChild {
        child,
        stdin,
        stdout: std::io::BufReader::new(stdout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_signal_names_and_numbers() {
        assert_eq!(parse_signal("SIGSEGV"), Some(Signal::SIGSEGV));
        assert_eq!(parse_signal("kill"), Some(Signal::SIGKILL));
        assert_eq!(parse_signal("15"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("NOPE"), None);
    }
}
