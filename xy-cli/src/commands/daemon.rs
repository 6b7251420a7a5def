//! `xyctl daemon start|stop|restart [--force]|status [--json]`. None of these
//! auto-spawn: they manage the daemon explicitly.

use std::time::Duration;

use xy_core::paths::Paths;
use xy_core::protocol::{ShutdownResult, method};

use crate::cli::DaemonCmd;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::daemon_conn::{self, Probe};
use crate::error::{Exit, Failure};
use crate::render::render_daemon_status;
use crate::{output, process};

/// How long `daemon stop` waits for xyd to stop its servers and exit
/// (xyd's own deadline is twice the longest grace period).
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// SIGTERM → SIGKILL window when `restart --force` kills a wedged daemon.
const KILL_GRACE: Duration = Duration::from_secs(5);

pub(crate) fn run(ctx: &Ctx, cmd: &DaemonCmd) -> Result<Exit, Failure> {
    let paths = ctx.paths()?;
    match cmd {
        DaemonCmd::Start => {
            match daemon_conn::detect(&paths) {
                Probe::Up(mut live) => {
                    daemon_conn::wait_booted(ctx, &mut live)?;
                    daemon_conn::warn_skew(ctx, &live.status);
                    output::stdout(&format!(
                        "xyd is already running (pid {})\n",
                        live.status.pid
                    ));
                }
                Probe::Down => {
                    let mut live = daemon_conn::start(ctx, &paths)?.live;
                    daemon_conn::wait_booted(ctx, &mut live)?;
                    daemon_conn::warn_skew(ctx, &live.status);
                    output::stdout(&format!("xyd started (pid {})\n", live.status.pid));
                }
                Probe::Wedged { pid, waited } => return Err(daemon_conn::wedged(pid, waited)),
                Probe::Elsewhere { pid, socket } => {
                    return Err(daemon_conn::elsewhere(&paths, pid, &socket));
                }
                Probe::Broken(e) => return Err(e.into()),
            }
            Ok(Exit::Success)
        }
        DaemonCmd::Stop => {
            match stop(ctx, &paths)? {
                Some(pid) => output::stdout(&format!("xyd stopped (pid {pid})\n")),
                None => output::stdout("xyd is not running\n"),
            }
            Ok(Exit::Success)
        }
        DaemonCmd::Restart { force } => {
            let mut was_running = true;
            match daemon_conn::detect(&paths) {
                Probe::Up(live) => {
                    drop(live);
                    stop(ctx, &paths)?;
                }
                Probe::Down => was_running = false,
                Probe::Wedged { pid, waited } => {
                    if !force {
                        return Err(daemon_conn::wedged(pid, waited));
                    }
                    kill_wedged(pid)?;
                }
                // Healthy, on another socket: never killed, even with --force.
                Probe::Elsewhere { pid, socket } => {
                    return Err(daemon_conn::elsewhere(&paths, pid, &socket));
                }
                Probe::Broken(e) => return Err(e.into()),
            }
            let mut live = daemon_conn::start(ctx, &paths)?.live;
            daemon_conn::wait_booted(ctx, &mut live)?;
            let pid = live.status.pid;
            output::stdout(&if was_running {
                format!("xyd restarted (pid {pid})\n")
            } else {
                format!("xyd was not running; started it (pid {pid})\n")
            });
            Ok(Exit::Success)
        }
        DaemonCmd::Status(json) => match daemon_conn::detect(&paths) {
            Probe::Up(live) => {
                if json.json {
                    output::json_line(live.raw.get());
                } else {
                    daemon_conn::warn_skew(ctx, &live.status);
                    output::stdout(&render_daemon_status(&live.status, &ctx.out));
                }
                Ok(Exit::Success)
            }
            Probe::Down => Err(daemon_conn::not_running(&paths)),
            Probe::Wedged { pid, waited } => Err(daemon_conn::wedged(pid, waited)),
            Probe::Elsewhere { pid, socket } => Err(daemon_conn::elsewhere(&paths, pid, &socket)),
            Probe::Broken(e) => Err(e.into()),
        },
    }
}

/// Asks a running daemon to shut down and waits until its pid is gone and
/// the socket no longer answers. `None` when no daemon was running.
///
/// With a login service installed, the service manager is told first:
/// systemd's `Restart=always` would otherwise start a daemon that merely
/// exited again at once. The `shutdown` call follows in every case, for a
/// daemon that the service manager did not start (also when the manager
/// cannot be reached: a warning, then the shutdown).
fn stop(ctx: &Ctx, paths: &Paths) -> Result<Option<u32>, Failure> {
    let mut live = match daemon_conn::detect(paths) {
        Probe::Up(live) => live,
        Probe::Down => return Ok(None),
        Probe::Wedged { pid, waited } => return Err(daemon_conn::wedged(pid, waited)),
        Probe::Elsewhere { pid, socket } => {
            return Err(daemon_conn::elsewhere(paths, pid, &socket));
        }
        Probe::Broken(e) => return Err(e.into()),
    };
    let pid = live.status.pid;
    if ctx.socket_override().is_none()
        && let Some(svc) = crate::service::installed_service()
        && let Err(e) = svc.stop()
    {
        // An unusable service manager (no user bus in an ssh session) did
        // not start this daemon either: the shutdown below stops it.
        output::warn(
            &ctx.err,
            &format!(
                "cannot stop the login service {}: {e}; stopping xyd directly",
                svc.name()
            ),
        );
    }
    match live
        .client
        .call::<(), ShutdownResult>(method::SHUTDOWN, None, READ_TIMEOUT)
    {
        Ok(_) => {}
        // It may close the connection before the reply makes it out.
        Err(xy_core::client::ClientError::Closed | xy_core::client::ClientError::Io(_)) => {}
        Err(e) => return Err(e.into()),
    }
    drop(live);
    let gone = process::wait_until(STOP_TIMEOUT, || !process::alive(pid));
    if gone && let Probe::Up(again) = daemon_conn::probe(paths, READ_TIMEOUT) {
        output::warn(
            &ctx.err,
            &format!(
                "xyd was started again at once (pid {}), by a service manager?",
                again.status.pid
            ),
        );
    }
    if !gone {
        return Err(Failure::new(
            Exit::Unreachable,
            format!(
                "xyd (pid {pid}) is still running {}s after `shutdown`",
                STOP_TIMEOUT.as_secs()
            ),
        )
        .with_detail("run `xyctl daemon restart --force` to kill and restart it"));
    }
    Ok(Some(pid))
}

/// Kills a wedged daemon after checking that the pid really is an xyd.
fn kill_wedged(pid: Option<u32>) -> Result<(), Failure> {
    let Some(pid) = pid else {
        return Err(Failure::new(
            Exit::Unreachable,
            "xyd does not answer and its pidfile names no live process; nothing to kill",
        ));
    };
    if !process::is_xyd(pid) {
        return Err(Failure::new(
            Exit::Operational,
            format!("pid {pid} from the pidfile is not an xyd; refusing to kill it"),
        ));
    }
    process::terminate(pid, KILL_GRACE).map_err(|e| Failure::new(Exit::Operational, e))
}
