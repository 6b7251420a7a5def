//! `xyctl logs [<name>...] [--tail N] [-f]`: prints the buffered tail, then
//! (with `-f`) new lines until Ctrl-C. Ctrl-C cancels the stream politely
//! (`logs_cancel`) and exits 0.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use xy_core::protocol::{
    ListEntry, LogEndNotification, LogEndReason, LogNotification, LogsCancelParams, LogsParams,
    LogsResult, Request, method,
};

use crate::cli::LogsArgs;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::render::{LogPrefix, render_log_line};
use crate::{daemon_conn, output};

/// The request id the signal thread uses for `logs_cancel`; the main thread
/// numbers its own requests from 1 and never gets near it.
const CANCEL_ID: u64 = 1 << 53;

/// How long after Ctrl-C we wait for the daemon to end the stream.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// The `logs` params for the names given.
pub(crate) fn params(names: &[String], tail: u32, follow: bool) -> LogsParams {
    LogsParams {
        name: match names {
            [one] => Some(one.clone()),
            _ => None,
        },
        names: (names.len() > 1).then(|| names.to_vec()),
        tail: Some(tail),
        follow,
    }
}

pub(crate) fn run(ctx: &Ctx, args: &LogsArgs) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let prefix = match args.names.as_slice() {
        [_] => None,
        [] => {
            // Every server: ask for the names now so the prefix column is
            // padded from the first line on.
            let all: Vec<ListEntry> = client.call::<(), _>(method::LIST, None, READ_TIMEOUT)?;
            Some(LogPrefix::new(all.into_iter().map(|e| e.name).collect()))
        }
        many => Some(LogPrefix::new(many.to_vec())),
    };
    let p = params(&args.names, args.tail, args.follow);
    let sub: LogsResult = client.call(method::LOGS, Some(&p), READ_TIMEOUT)?;
    if args.follow {
        cancel_on_signal(
            client.try_clone_stream()?,
            method::LOGS_CANCEL,
            sub.subscription_id,
        )?;
    }

    loop {
        let deadline = (!args.follow).then(|| Instant::now() + READ_TIMEOUT);
        let note = client.next_notification(deadline)?;
        match note.method.as_str() {
            method::LOG => {
                let line: LogNotification = note.decode()?;
                if line.subscription_id == sub.subscription_id {
                    output::stdout(&render_log_line(&line, prefix.as_ref(), &ctx.out));
                }
            }
            method::LOG_END => {
                let end: LogEndNotification = note.decode()?;
                if end.subscription_id != sub.subscription_id {
                    continue;
                }
                return match end.reason {
                    Some(LogEndReason::Lagged) => Err(Failure::new(
                        Exit::Operational,
                        "xyctl fell behind and xyd dropped the stream; some lines were lost",
                    )),
                    Some(LogEndReason::Shutdown) => {
                        output::note(&ctx.err, "xyd is shutting down; stream ended");
                        Ok(Exit::Success)
                    }
                    Some(LogEndReason::Removed) => {
                        output::note(&ctx.err, "the server was removed by reload; stream ended");
                        Ok(Exit::Success)
                    }
                    Some(LogEndReason::Complete | LogEndReason::Cancelled) | None => {
                        Ok(Exit::Success)
                    }
                };
            }
            _ => {}
        }
    }
}

/// Blocks SIGINT/SIGTERM/SIGHUP in every thread and waits for them on a
/// dedicated one, which sends `logs_cancel` on the shared socket. The main
/// thread then sees `log_end {cancelled}` and returns 0. If the daemon does
/// not end the stream promptly, the thread exits 0 itself. `cancel` is
/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and the threads it
/// starts after), so one thread can `wait` for them and end a stream or a
/// screen cleanly instead of the process dying mid-write.
pub(crate) fn block_signals() -> Result<SigSet, Failure> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set.thread_block()
        .map_err(|e| Failure::new(Exit::Operational, format!("cannot block signals: {e}")))?;
    Ok(set)
}

/// `logs_cancel` or `events_cancel`.
pub(crate) fn cancel_on_signal(
    mut stream: UnixStream,
    cancel: &'static str,
    subscription_id: u64,
) -> Result<(), Failure> {
    let set = block_signals()?;
    std::thread::spawn(move || {
        if set.wait().is_err() {
            return;
        }
        let req = Request::new(
            CANCEL_ID,
            cancel,
            Some(LogsCancelParams { subscription_id }),
        );
        if let Ok(mut line) = serde_json::to_vec(&req) {
            line.push(b'\n');
            let _ = stream.set_write_timeout(Some(CANCEL_GRACE));
            let _ = stream.write_all(&line);
        }
        std::thread::sleep(CANCEL_GRACE);
        std::process::exit(0);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn params_shapes() {
        assert_eq!(
            serde_json::to_string(&params(&names(&["a"]), 50, false)).unwrap(),
            r#"{"name":"a","tail":50}"#
        );
        assert_eq!(
            serde_json::to_string(&params(&names(&["a", "b"]), 5, true)).unwrap(),
            r#"{"names":["a","b"],"tail":5,"follow":true}"#
        );
        assert_eq!(
            serde_json::to_string(&params(&[], 50, true)).unwrap(),
            r#"{"tail":50,"follow":true}"#
        );
    }
}
