//! Detect-or-spawn (SPEC §8, after Coffer ADR-006): find a live xyd on the
//! socket, else start one — through the login service when it is installed,
//! else by spawning `xyd` detached — and wait, bounded, until it answers.
//! The pidfile `flock` inside xyd decides races between concurrent starters.
//! Commands that write server files also ask here for the config directory
//! the daemon reads ([`daemon_and_dir`]).

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use xy_core::paths::Paths;
use xy_core::protocol::{DaemonStatus, method};

use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{output, process};
use xy_core::client::{Client, ClientError};

/// How long a started daemon gets to answer `daemon_status`.
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(5);

/// A daemon that answered `daemon_status`.
pub(crate) struct Live {
    /// The connection, ready for the next call.
    pub(crate) client: Client,
    /// What it said.
    pub(crate) status: DaemonStatus,
    /// The same, verbatim (for `daemon status --json`).
    pub(crate) raw: Box<RawValue>,
}

/// What is on the other side of the socket.
pub(crate) enum Probe {
    /// A daemon that answers.
    Up(Box<Live>),
    /// Nobody: the socket is missing or refuses connections.
    Down,
    /// A daemon holds the lock (or accepted the connection) but does not answer.
    Wedged {
        /// From the pidfile, when it names a live process.
        pid: Option<u32>,
        /// How long we waited.
        waited: Duration,
    },
    /// The daemon of this state directory (it holds the lock) answers, but
    /// on another socket: it was started with another `XY_SOCKET` or
    /// `XDG_RUNTIME_DIR`. It is not wedged and must not be killed as such.
    Elsewhere {
        /// The lock holder.
        pid: u32,
        /// Where it answered.
        socket: PathBuf,
    },
    /// Something else went wrong (permission denied, a protocol error).
    Broken(ClientError),
}

/// One look at the socket: connect, then `daemon_status` within `timeout`.
pub(crate) fn probe(paths: &Paths, timeout: Duration) -> Probe {
    let mut client = match Client::connect(&paths.socket, timeout) {
        Ok(c) => c,
        Err(ClientError::Connect { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Probe::Down;
        }
        Err(e) => return Probe::Broken(e),
    };
    let raw = match client.call_raw::<()>(method::DAEMON_STATUS, None, timeout) {
        Ok(raw) => raw,
        Err(ClientError::Timeout { .. }) => {
            return Probe::Wedged {
                pid: process::read_pidfile(&paths.pidfile).filter(|p| process::alive(*p)),
                waited: timeout,
            };
        }
        // A daemon closing on us is on its way out: treat it as gone.
        Err(ClientError::Closed | ClientError::Io(_)) => return Probe::Down,
        Err(e) => return Probe::Broken(e),
    };
    match serde_json::from_str(raw.get()) {
        Ok(status) => Probe::Up(Box::new(Live {
            client,
            status,
            raw,
        })),
        Err(e) => Probe::Broken(ClientError::Protocol(format!(
            "bad `daemon_status` result: {e}"
        ))),
    }
}

/// [`probe`], and when nobody answers but a live xyd holds the lock (it is
/// booting, or stuck before binding), wait for it up to [`BOOT_TIMEOUT`].
pub(crate) fn detect(paths: &Paths) -> Probe {
    match probe(paths, READ_TIMEOUT) {
        Probe::Down => {}
        other => return other,
    }
    let Some(holder) = process::lock_holder(&paths.pidfile) else {
        return Probe::Down;
    };
    if let Some(socket) = serving_elsewhere(paths, holder) {
        return Probe::Elsewhere {
            pid: holder,
            socket,
        };
    }
    let deadline = Instant::now() + BOOT_TIMEOUT;
    loop {
        match probe(paths, READ_TIMEOUT) {
            Probe::Down => {}
            other => return other,
        }
        let holder = process::lock_holder(&paths.pidfile);
        if holder.is_none() {
            return Probe::Down;
        }
        if Instant::now() >= deadline {
            // It may have bound another socket while we waited.
            if let Some(pid) = holder
                && let Some(socket) = serving_elsewhere(paths, pid)
            {
                return Probe::Elsewhere { pid, socket };
            }
            return Probe::Wedged {
                pid: holder,
                waited: BOOT_TIMEOUT,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where the lock holder answers when that is not `paths.socket`: the socket
/// its own environment resolves to (Linux: `/proc/<pid>/environ`), else the
/// default one (ours without `XY_SOCKET`). `None` when it answers on neither.
fn serving_elsewhere(paths: &Paths, holder: u32) -> Option<PathBuf> {
    let home = std::env::home_dir();
    let mut candidates = Vec::new();
    if let Some(env) = process::environ(holder) {
        let lookup = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let its_home = lookup("HOME").map(PathBuf::from).or_else(|| home.clone());
        if let Ok(p) = Paths::resolve(lookup, its_home) {
            candidates.push(p.socket);
        }
    }
    let ours_by_default = |k: &str| (k != "XY_SOCKET").then(|| std::env::var_os(k)).flatten();
    if let Ok(p) = Paths::resolve(ours_by_default, home) {
        candidates.push(p.socket);
    }
    candidates
        .into_iter()
        .filter(|s| *s != paths.socket)
        .find(|s| {
            let there = Paths {
                socket: s.clone(),
                ..paths.clone()
            };
            matches!(probe(&there, Duration::from_secs(1)), Probe::Up(live) if live.status.pid == holder)
        })
}

/// The failure for [`Probe::Elsewhere`]: exit 2, and how to reach it.
pub(crate) fn elsewhere(paths: &Paths, pid: u32, socket: &Path) -> Failure {
    Failure::new(
        Exit::Unreachable,
        format!(
            "xyd (pid {pid}) runs for this state directory ({}) but listens on {}, not on {}",
            paths.state_dir.display(),
            socket.display(),
            paths.socket.display()
        ),
    )
    .with_detail(format!(
        "use `--socket {}` (or the XY_SOCKET it was started with); a second daemon needs its own XDG_STATE_HOME",
        socket.display()
    ))
}

/// A connected client for a command: detect, else spawn (unless forbidden),
/// and warn about a version mismatch.
pub(crate) fn connect(ctx: &Ctx) -> Result<Client, Failure> {
    let paths = ctx.paths()?;
    let live = match detect(&paths) {
        Probe::Up(live) => live,
        Probe::Down if ctx.no_spawn => return Err(not_running(&paths)),
        Probe::Down => {
            let started = start(ctx, &paths)?;
            // Of several clients starting a daemon at once, only the one whose
            // xyd won the lock says it started it.
            if started.by_us {
                let pid = started.live.status.pid;
                output::note(&ctx.err, &format!("started xyd (pid {pid})"));
            }
            started.live
        }
        Probe::Wedged { pid, waited } => return Err(wedged(pid, waited)),
        Probe::Elsewhere { pid, socket } => return Err(elsewhere(&paths, pid, &socket)),
        Probe::Broken(e) => return Err(e.into()),
    };
    let mut live = live;
    wait_booted(ctx, &mut live)?;
    warn_skew(ctx, &live.status);
    Ok(live.client)
}

/// [`connect`], and the config directory the daemon reads: what `add`,
/// `remove`, `upgrade`, `rollback` and `import` write into. With the daemon unreachable
/// and spawning forbidden, no client and the default directory.
pub(crate) fn daemon_and_dir(ctx: &Ctx) -> Result<(Option<Client>, PathBuf), Failure> {
    match connect(ctx) {
        Ok(mut c) => {
            let st: DaemonStatus = c.call::<(), _>(method::DAEMON_STATUS, None, READ_TIMEOUT)?;
            Ok((Some(c), PathBuf::from(st.config_dir)))
        }
        Err(f) if f.exit == Exit::Unreachable && ctx.no_spawn => {
            let paths =
                Paths::from_env().map_err(|e| Failure::new(Exit::Operational, e.to_string()))?;
            Ok((None, paths.config_dir))
        }
        Err(f) => Err(f),
    }
}

/// Time allowed past the sweep's grace for the SIGKILL wait and for the
/// engine to start.
const BOOT_SETTLE: Duration = Duration::from_secs(15);

/// A daemon that answers but still boots (it is stopping a previous
/// daemon's orphans before any server starts) is making progress, not
/// wedged: poll `daemon_status` until the boot is over, allowing the sweep's
/// grace and [`BOOT_SETTLE`]. Says once on stderr what it waits for when
/// there are orphans to wait for.
pub(crate) fn wait_booted(ctx: &Ctx, live: &mut Live) -> Result<(), Failure> {
    let Some(first) = live.status.boot.clone() else {
        return Ok(());
    };
    let started = Instant::now();
    let deadline = started + Duration::from_secs(first.grace_secs) + BOOT_SETTLE;
    let mut told = false;
    let mut progress = first;
    loop {
        if !told && progress.orphans > 0 {
            told = true;
            output::note(
                &ctx.err,
                &format!(
                    "xyd (pid {}) is stopping {} orphaned server process group(s) of a previous \
                     daemon before it starts servers; waiting (up to {}s)",
                    live.status.pid,
                    progress.orphans,
                    progress.grace_secs + BOOT_SETTLE.as_secs()
                ),
            );
        }
        if Instant::now() >= deadline {
            return Err(Failure::new(
                Exit::Unreachable,
                format!(
                    "xyd (pid {}) is still booting after {}s: {} of {} orphaned process groups \
                     are still alive",
                    live.status.pid,
                    started.elapsed().as_secs(),
                    progress.orphans_left,
                    progress.orphans
                ),
            )
            .with_detail("see `xyctl daemon status` and the daemon log"));
        }
        std::thread::sleep(Duration::from_millis(50));
        let raw = match live
            .client
            .call_raw::<()>(method::DAEMON_STATUS, None, READ_TIMEOUT)
        {
            Ok(raw) => raw,
            Err(ClientError::Timeout { .. }) => {
                return Err(wedged(Some(live.status.pid), READ_TIMEOUT));
            }
            Err(e) => return Err(e.into()),
        };
        let status: DaemonStatus = serde_json::from_str(raw.get()).map_err(|e| {
            Failure::from(ClientError::Protocol(format!(
                "bad `daemon_status` result: {e}"
            )))
        })?;
        match status.boot.clone() {
            None => {
                live.status = status;
                live.raw = raw;
                return Ok(());
            }
            Some(p) => progress = p,
        }
    }
}

/// `xyd is not running (socket …)`, exit 2.
pub(crate) fn not_running(paths: &Paths) -> Failure {
    Failure::new(
        Exit::Unreachable,
        format!(
            "xyd is not running (socket {}); start it with `xyctl daemon start`",
            paths.socket.display()
        ),
    )
}

/// The wedged-daemon failure, exit 2.
pub(crate) fn wedged(pid: Option<u32>, waited: Duration) -> Failure {
    let who = pid.map_or_else(|| "xyd".to_owned(), |p| format!("xyd (pid {p})"));
    Failure::new(
        Exit::Unreachable,
        format!(
            "{who} holds the lock but has not answered for {}s",
            waited.as_secs()
        ),
    )
    .with_detail("run `xyctl daemon restart --force` to kill and restart it")
}

/// Warns once when the daemon is another version than this client.
pub(crate) fn warn_skew(ctx: &Ctx, status: &DaemonStatus) {
    if status.version != xy_core::VERSION {
        output::warn(
            &ctx.err,
            &format!(
                "xyd is version {}, xyctl is {}; run `xyctl daemon restart`",
                status.version,
                xy_core::VERSION
            ),
        );
    }
}

/// Starts a daemon (service manager, else a detached `xyd`) and waits until
/// it answers.
/// A daemon [`start`] brought up, or found brought up by a concurrent client.
pub(crate) struct Started {
    pub(crate) live: Box<Live>,
    /// Whether it is the xyd this client spawned (or asked the service for),
    /// not the winner of a concurrent start.
    pub(crate) by_us: bool,
}

pub(crate) fn start(ctx: &Ctx, paths: &Paths) -> Result<Started, Failure> {
    let log_from = log_len(&paths.daemon_log());
    // A service-managed daemon listens on the default socket; with an
    // explicit `--socket`/`XY_SOCKET` we spawn our own instead.
    let service = if ctx.socket_override().is_none() {
        start_via_service()
    } else {
        None
    };
    match service {
        Some(Ok(())) => return wait_ready(ctx, paths, None, log_from),
        // The service manager cannot be used (no user bus in an ssh
        // session, launchd refusing): the daemon is still wanted.
        Some(Err(e)) => output::warn(&ctx.err, &format!("{}; starting xyd directly", e.message)),
        None => {}
    }
    let xyd = find_xyd()?;
    let child = spawn_detached(&xyd, ctx.socket_override())?;
    wait_ready(ctx, paths, Some(Spawned { child, xyd }), log_from)
}

/// Asks the login service manager to start xyd when a service is installed;
/// `None` when none is.
fn start_via_service() -> Option<Result<(), Failure>> {
    let svc = crate::service::installed_service()?;
    Some(crate::service::start_service(&svc).map_err(|e| {
        Failure::new(
            Exit::Unreachable,
            format!(
                "cannot start xyd through the login service {}: {e}",
                svc.name()
            ),
        )
    }))
}

struct Spawned {
    child: Child,
    xyd: PathBuf,
}

/// Polls until the daemon answers, our spawned child dies, or the deadline.
fn wait_ready(
    ctx: &Ctx,
    paths: &Paths,
    mut spawned: Option<Spawned>,
    log_from: u64,
) -> Result<Started, Failure> {
    let deadline = Instant::now() + BOOT_TIMEOUT;
    let mut respawns = 0;
    // Through the service manager there is no child of ours to compare.
    let mut ours_lost = false;
    loop {
        match probe(paths, Duration::from_secs(1)) {
            Probe::Up(live) => {
                let by_us = match &spawned {
                    Some(s) => live.status.pid == s.child.id(),
                    None => !ours_lost,
                };
                return Ok(Started { live, by_us });
            }
            Probe::Broken(e) => return Err(e.into()),
            Probe::Down | Probe::Wedged { .. } | Probe::Elsewhere { .. } => {}
        }
        if let Some(s) = spawned.as_mut()
            && let Some(status) = s.child.try_wait()?
        {
            let xyd = s.xyd.clone();
            spawned = None;
            let lost_race = || {
                process::lock_holder(&paths.pidfile).is_some()
                    || log_since(&paths.daemon_log(), log_from).contains("already running")
            };
            match after_exit(status.code(), lost_race, respawns) {
                AfterExit::KeepPolling => ours_lost = true,
                // Exit 1 with an error of its own in daemon.log (not the
                // lock): spawning again would only log it again.
                AfterExit::Respawn
                    if logged_boot_error(&log_since(&paths.daemon_log(), log_from)) =>
                {
                    return Err(boot_failure(ctx, paths, &xyd, status, log_from));
                }
                AfterExit::Respawn => {
                    respawns += 1;
                    spawned = Some(Spawned {
                        child: spawn_detached(&xyd, ctx.socket_override())?,
                        xyd,
                    });
                }
                AfterExit::Fail => return Err(boot_failure(ctx, paths, &xyd, status, log_from)),
            }
        }
        if Instant::now() >= deadline {
            if let Some(pid) = process::lock_holder(&paths.pidfile) {
                return Err(wedged(Some(pid), BOOT_TIMEOUT));
            }
            // A service manager restarting a daemon that cannot load its
            // config looks like silence from here: say why.
            if let Err(errs) = xy_core::config::load(&paths.config_dir, &paths.settings_file) {
                let mut f = Failure::config_invalid(&paths.config_dir, &errs, ctx.err.color);
                f.message = format!("xyd could not start: {}", f.message);
                return Err(f);
            }
            return Err(Failure::new(
                Exit::Unreachable,
                format!(
                    "xyd did not answer on {} within {}s",
                    paths.socket.display(),
                    BOOT_TIMEOUT.as_secs()
                ),
            )
            .with_detail(log_detail(paths, log_from)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether xyd logged an error at boot other than losing the lock.
fn logged_boot_error(log: &str) -> bool {
    log.lines()
        .any(|l| l.contains(" ERROR ") && !l.contains("already running"))
}

/// Respawns allowed when a spawned xyd lost a lock race to nobody.
const MAX_RESPAWNS: u32 = 3;

/// What to do when the xyd we spawned exited before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterExit {
    /// Another daemon holds the lock: it will answer; keep polling.
    KeepPolling,
    /// Exit 1 but no one holds the lock (the winner died, or a lock probe
    /// raced the boot): spawn again.
    Respawn,
    /// A real boot failure: report it.
    Fail,
}

/// Exit 1 is xyd's "already running" (another starter won the `flock`);
/// anything else (3: config, 1 with no winner after retries) is a failure.
/// `lost_race` is only evaluated for exit 1 (it may probe the lock).
fn after_exit(code: Option<i32>, lost_race: impl FnOnce() -> bool, respawns: u32) -> AfterExit {
    if code != Some(1) {
        return AfterExit::Fail;
    }
    if lost_race() {
        AfterExit::KeepPolling
    } else if respawns < MAX_RESPAWNS {
        AfterExit::Respawn
    } else {
        AfterExit::Fail
    }
}

/// The failure for a spawned daemon that exited during boot: exit 3 with
/// the config diagnostics when its config is invalid, else 2 with the tail
/// of `daemon.log`.
fn boot_failure(
    ctx: &Ctx,
    paths: &Paths,
    xyd: &Path,
    status: ExitStatus,
    log_from: u64,
) -> Failure {
    if status.code() == Some(3) {
        // Render the diagnostics ourselves (colour, carets) rather than
        // relaying tracing lines; the daemon read the same directory.
        if let Err(errs) = xy_core::config::load(&paths.config_dir, &paths.settings_file) {
            let mut f = Failure::config_invalid(&paths.config_dir, &errs, ctx.err.color);
            f.message = format!("xyd could not start: {}", f.message);
            return f;
        }
        return Failure::new(
            Exit::ConfigInvalid,
            "xyd could not start: its config is invalid",
        )
        .with_detail(log_detail(paths, log_from));
    }
    Failure::new(
        Exit::Unreachable,
        format!("xyd ({}) exited during boot ({status})", xyd.display()),
    )
    .with_detail(log_detail(paths, log_from))
}

/// What `daemon.log` gained since `from` (its last 30 lines), or a pointer
/// to the file when it gained nothing.
fn log_detail(paths: &Paths, from: u64) -> String {
    let log = paths.daemon_log();
    let new = log_since(&log, from);
    let lines: Vec<&str> = new.lines().collect();
    if lines.is_empty() {
        return format!("(nothing new in {})", log.display());
    }
    let tail = &lines[lines.len().saturating_sub(30)..];
    format!("from {}:\n{}", log.display(), tail.join("\n"))
}

fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The text appended to `path` since offset `from` (all of it if the file
/// shrank, i.e. rotated), capped at the last 64 KiB.
fn log_since(path: &Path, from: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let start = if len < from { 0 } else { from };
    let start = start.max(len.saturating_sub(64 * 1024));
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The one `xyd` lookup (shared with `xyctl service install`): next to our
/// own executable, else the first on PATH.
fn find_xyd() -> Result<PathBuf, Failure> {
    crate::service::locate_xyd().ok_or_else(|| {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|d| d.join("xyd")));
        Failure::new(
            Exit::Unreachable,
            format!(
                "cannot start xyd: not found next to xyctl ({}) nor on PATH",
                beside.map_or_else(|| "?".to_owned(), |p| p.display().to_string())
            ),
        )
    })
}

/// Spawns `xyd` in a new session with stdio on /dev/null, in `$HOME`, and
/// does not wait for it. It inherits our environment (XDG_*, XY_LOG);
/// `--socket` is passed on as `XY_SOCKET`.
fn spawn_detached(xyd: &Path, socket: Option<&PathBuf>) -> Result<Child, Failure> {
    let mut cmd = Command::new(xyd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .current_dir(std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from));
    if let Some(s) = socket {
        cmd.env("XY_SOCKET", s);
    }
    new_session(&mut cmd);
    cmd.spawn().map_err(|e| {
        Failure::new(
            Exit::Unreachable,
            format!("cannot start xyd ({}): {e}", xyd.display()),
        )
    })
}

/// Makes the child a session leader. `process_group(0)` alone would keep it
/// in our session, so closing the terminal (SIGHUP to the session) could
/// take the daemon down with it; only `setsid()` in the child detaches it
/// from the controlling terminal, and std offers no safe way to call it.
#[allow(unsafe_code)]
fn new_session(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec. It calls only
    // setsid(2), which is async-signal-safe, allocates nothing and touches
    // no state shared with the parent. It cannot fail here: a fresh fork is
    // never a process-group leader (we do not also set `process_group`).
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_since_reads_appended_text_or_all_after_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("daemon.log");
        assert_eq!(log_since(&p, 0), "");
        std::fs::write(&p, "old line\n").unwrap();
        let from = log_len(&p);
        std::fs::write(&p, "old line\nnew line\n").unwrap();
        assert_eq!(log_since(&p, from), "new line\n");
        std::fs::write(&p, "x\n").unwrap();
        assert_eq!(log_since(&p, from), "x\n", "rotated: read from the start");
    }

    #[test]
    fn exit_of_spawned_daemon() {
        let never = || -> bool { panic!("lock probed for a non-1 exit") };
        assert_eq!(after_exit(Some(3), never, 0), AfterExit::Fail);
        assert_eq!(after_exit(None, never, 0), AfterExit::Fail);
        assert_eq!(after_exit(Some(0), never, 0), AfterExit::Fail);
        assert_eq!(after_exit(Some(1), || true, 0), AfterExit::KeepPolling);
        assert_eq!(
            after_exit(Some(1), || true, MAX_RESPAWNS),
            AfterExit::KeepPolling
        );
        assert_eq!(after_exit(Some(1), || false, 0), AfterExit::Respawn);
        assert_eq!(after_exit(Some(1), || false, MAX_RESPAWNS), AfterExit::Fail);
        assert!(logged_boot_error(
            "2026-12-01T08:14:30.745717Z ERROR xyd: /run/xy.sock exists and is not a socket\n"
        ));
        assert!(!logged_boot_error(
            "2026-12-01T08:14:30.745717Z ERROR xyd: xyd already running (pid 7)\n\
             2026-12-01T08:14:30.745717Z  INFO xyd ready\n"
        ));
    }

    #[test]
    fn wedged_message() {
        let f = wedged(Some(4242), Duration::from_secs(5));
        assert_eq!(f.exit, Exit::Unreachable);
        assert_eq!(
            f.message,
            "xyd (pid 4242) holds the lock but has not answered for 5s"
        );
        assert!(f.detail.unwrap().contains("xyctl daemon restart --force"));
    }

    #[test]
    fn spawned_child_is_a_session_leader() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        new_session(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        let sid = nix::unistd::getsid(Some(pid));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(sid.unwrap(), pid);
        assert_ne!(nix::unistd::getsid(None).unwrap(), pid);
    }
}
