//! Facts about other processes that detect-or-spawn and `daemon restart
//! --force` need: is a pid alive (zombies are not), is it really an `xyd`,
//! who holds the pidfile lock, and a TERM-then-KILL stop.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The pid written in the pidfile, if any.
pub(crate) fn read_pidfile(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether `pid` is a live process. A zombie is dead: on machines whose init
/// does not reap orphans, an exited detached daemon lingers as one.
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match kill(Pid::from_raw(raw), None) {
        Ok(()) | Err(Errno::EPERM) => !is_zombie(pid),
        Err(_) => false,
    }
}

#[cfg(target_os = "linux")]
fn is_zombie(pid: u32) -> bool {
    // Field 3 of /proc/<pid>/stat, after the last ')' (comm may hold parens).
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(false)
}

#[cfg(not(target_os = "linux"))]
fn is_zombie(pid: u32) -> bool {
    ps_field(pid, "state=").is_some_and(|s| s.starts_with('Z'))
}

/// Whether `pid` runs an executable called `xyd` (checked before signalling
/// a pid read from a file, so a recycled pid is never killed).
pub(crate) fn is_xyd(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
            // A replaced binary reads as `…/xyd (deleted)`.
            return exe
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "xyd" || n == "xyd (deleted)");
        }
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "xyd")
    }
    #[cfg(not(target_os = "linux"))]
    {
        // `ps` spares us the unsafe `proc_pidpath` call; this runs only on the
        // rare wedged-daemon path.
        ps_field(pid, "comm=")
            .is_some_and(|c| Path::new(c.trim()).file_name().is_some_and(|n| n == "xyd"))
    }
}

#[cfg(not(target_os = "linux"))]
fn ps_field(pid: u32, field: &str) -> Option<String> {
    let out = std::process::Command::new("ps")
        .args(["-o", field, "-p", &pid.to_string()])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The environment `pid` was started with (`/proc/<pid>/environ`); `None`
/// where that cannot be read (another user's process, not Linux).
#[cfg(target_os = "linux")]
pub(crate) fn environ(pid: u32) -> Option<Vec<(String, std::ffi::OsString)>> {
    use std::os::unix::ffi::OsStrExt;
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter_map(|kv| {
                let eq = kv.iter().position(|b| *b == b'=')?;
                let key = std::str::from_utf8(&kv[..eq]).ok()?;
                Some((
                    key.to_owned(),
                    std::ffi::OsStr::from_bytes(&kv[eq + 1..]).to_owned(),
                ))
            })
            .collect(),
    )
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn environ(_pid: u32) -> Option<Vec<(String, std::ffi::OsString)>> {
    None
}

/// The pid of a live `xyd` that holds the pidfile lock, if there is one.
///
/// The lock is only probed when the pidfile names a live `xyd`: probing takes
/// the lock for an instant, and an `xyd` booting in that instant would give
/// up with "already running". Looking at the pid first keeps that window to
/// the rare case where a daemon really is there.
pub(crate) fn lock_holder(pidfile: &Path) -> Option<u32> {
    let pid = read_pidfile(pidfile)?;
    if !alive(pid) || !is_xyd(pid) {
        return None;
    }
    let file = File::open(pidfile).ok()?;
    match file.try_lock() {
        Ok(()) => None, // Dropping `file` releases it at once.
        Err(_) => Some(pid),
    }
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
pub(crate) fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL and wait again.
pub(crate) fn terminate(pid: u32, grace: Duration) -> Result<(), String> {
    let target = Pid::from_raw(i32::try_from(pid).map_err(|e| e.to_string())?);
    match kill(target, Signal::SIGTERM) {
        Ok(()) => {}
        Err(Errno::ESRCH) => return Ok(()),
        Err(e) => return Err(format!("cannot signal pid {pid}: {e}")),
    }
    if wait_until(grace, || !alive(pid)) {
        return Ok(());
    }
    match kill(target, Signal::SIGKILL) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => return Err(format!("cannot kill pid {pid}: {e}")),
    }
    if wait_until(Duration::from_secs(5), || !alive(pid)) {
        Ok(())
    } else {
        Err(format!("pid {pid} survived SIGKILL"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_is_alive_and_not_xyd() {
        let me = std::process::id();
        assert!(alive(me));
        assert!(!is_xyd(me));
        assert!(!alive(0));
        assert!(!alive(u32::MAX));
    }

    #[test]
    fn reaped_child_is_dead_and_zombie_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Until we wait, the exited child is a zombie: still "not alive".
        assert!(wait_until(
            xy_testbins::wait::scaled(Duration::from_secs(5)),
            || !alive(pid)
        ));
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn terminate_stops_a_sleeper() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let waiter = std::thread::spawn(move || child.wait());
        terminate(pid, Duration::from_secs(5)).unwrap();
        assert!(!waiter.join().unwrap().unwrap().success());
    }

    #[test]
    fn pidfile_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let pf = dir.path().join("xy.pid");
        assert_eq!(read_pidfile(&pf), None);
        std::fs::write(&pf, format!("{}\n", std::process::id())).unwrap();
        assert_eq!(read_pidfile(&pf), Some(std::process::id()));
        // Our own pid is alive but is not an xyd: nobody holds the lock.
        assert_eq!(lock_holder(&pf), None);
    }
}
