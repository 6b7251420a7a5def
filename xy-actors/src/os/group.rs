//! Process groups as the OS sees them: signalling a group, deciding whether
//! it is gone (zombies count as dead), reaping reparented descendants by pid,
//! process start times for PID-reuse-safe records, and the child subreaper.
//! Like the rest of `os/`, OS-specific code with thin `cfg` branches.

use std::io;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Makes this process the subreaper of its descendants (Linux
/// `PR_SET_CHILD_SUBREAPER`), so a grandchild whose parent died is reparented
/// to us, not to a PID 1 that may never reap it. A no-op elsewhere. The daemon
/// calls it once at boot; the engine then reaps such zombies by pid.
pub fn become_subreaper() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(())
    }
}

/// Sends `sig` to every process of group `pgid`. A group that no longer
/// exists is not an error.
pub(crate) fn signal_group(pgid: i32, sig: Signal) -> io::Result<()> {
    if pgid <= 1 {
        // killpg(0) or (1) would hit ourselves or everything: never.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal pgid <= 1",
        ));
    }
    match killpg(Pid::from_raw(pgid), sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether any live (non-zombie) process has process group `pgid`. On Linux
/// it also reaps zombies of that group that were reparented to us — by pid,
/// never `waitpid(-1)`, and never `skip` (the leader tokio waits for).
///
/// `killpg(pgid, 0)` answers first: ESRCH means no member at all, the usual
/// case once the leader is reaped, and costs one syscall. Only when members
/// remain is `/proc` scanned, to tell zombies from live ones.
pub(crate) fn group_alive(pgid: i32, skip: Option<i32>) -> bool {
    if !killpg_probe(pgid) {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        scan_group(pgid, skip)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = skip;
        true
    }
}

/// The `/proc` scan behind [`group_alive`] (a few ms on a busy host).
#[cfg(target_os = "linux")]
fn scan_group(pgid: i32, skip: Option<i32>) -> bool {
    if std::fs::read_dir("/proc").is_err() {
        return true;
    }
    let mut alive = false;
    for pid in crate::os::procfs::pids() {
        let Some(stat) = crate::os::procfs::stat(pid) else {
            continue;
        };
        if stat.pgrp != pgid {
            continue;
        }
        if stat.is_dead() {
            if Some(pid) != skip {
                reap(pid);
            }
        } else {
            alive = true;
        }
    }
    alive
}

fn killpg_probe(pgid: i32) -> bool {
    !matches!(
        killpg(Pid::from_raw(pgid), None::<Signal>),
        Err(Errno::ESRCH)
    )
}

/// Collects the exit status of `pid` if it is our (reparented) zombie.
#[cfg(target_os = "linux")]
fn reap(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    // ECHILD (not our child) is expected for zombies that belong to PID 1.
    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

/// Enlarges a pipe's kernel buffer (Linux), so a chatty child rarely blocks
/// on a full pipe while its pump is busy. Best effort: the limit is
/// `/proc/sys/fs/pipe-max-size` (1 MiB by default).
pub(crate) fn enlarge_pipe(fd: std::os::fd::BorrowedFd<'_>) {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(1024 * 1024));
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
    }
}

/// Whether `pid` exists and is not a zombie.
pub(crate) fn pid_alive(pid: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        crate::os::procfs::stat(pid).is_some_and(|s| !s.is_dead())
    }
    #[cfg(not(target_os = "linux"))]
    {
        !matches!(
            nix::sys::signal::kill(Pid::from_raw(pid), None::<Signal>),
            Err(Errno::ESRCH)
        )
    }
}

/// Polls until group `pgid` has no live member. Starts fast (a group
/// usually vanishes within milliseconds of SIGKILL) and settles at 50 ms.
///
/// The probe runs inline only while it is one syscall; a `/proc` scan goes
/// to the blocking pool, so it never holds up an async worker (the actor
/// that must arm the backoff timer may be queued right behind this task).
pub(crate) async fn wait_group_gone(pgid: i32, skip: Option<i32>) {
    let mut delay = Duration::from_millis(2);
    loop {
        if !killpg_probe(pgid) {
            return;
        }
        let alive = tokio::task::spawn_blocking(move || group_alive(pgid, skip))
            .await
            .unwrap_or(true);
        if !alive {
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

/// When `pid` started, in a platform unit that only needs to compare equal
/// for the same process (Linux: clock ticks since boot; macOS: µs since the
/// epoch). `None` if the process does not exist.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        crate::os::procfs::stat(pid).map(|s| s.start_ticks)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = pid;
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::Duration;

    #[test]
    fn parses_stat_with_parens_in_comm() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let s = crate::os::procfs::parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.start_ticks, 987654);
    }

    /// Polls until the group is gone or `within` has passed.
    fn wait_gone(pgid: i32, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let mut delay = Duration::from_millis(2);
        loop {
            if !super::group_alive(pgid, None) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_millis(50));
        }
    }

    /// The leader is reaped but a member lives on: the probe sees members,
    /// the scan finds the live one; once it is killed the group is gone.
    #[test]
    fn group_outlives_its_reaped_leader() {
        use std::os::unix::process::CommandExt;
        let sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 >/dev/null & echo $!"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pgid = i32::try_from(sh.id()).unwrap();
        let out = sh.wait_with_output().unwrap();
        let member: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(super::group_alive(pgid, None), "sleep {member} still runs");
        super::signal_group(pgid, nix::sys::signal::Signal::SIGKILL).unwrap();
        assert!(wait_gone(pgid, std::time::Duration::from_secs(10)));
        assert!(!super::pid_alive(member));
    }

    #[test]
    fn own_process_is_alive_and_has_a_start_time() {
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(super::pid_alive(me));
        assert!(super::start_time(me).is_some());
    }
}
