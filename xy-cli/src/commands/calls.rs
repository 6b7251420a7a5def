//! `xyctl calls [NAME] [-f] [--limit N] [--json]`: the recorded tool calls
//! (SPEC §20) as a table, oldest first; with `-f`, one more row per new
//! call until Ctrl-C, which cancels the stream politely and exits 0.

use std::time::Instant;

use xy_core::protocol::{
    CallEndNotification, CallEndReason, CallNotification, CallsParams, CallsResult, method,
};

use crate::cli::CallsArgs;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::render::{CallColumns, render_calls};
use crate::{daemon_conn, output};

/// The `calls` params for the arguments.
pub(crate) fn params(args: &CallsArgs) -> CallsParams {
    CallsParams {
        name: args.name.clone(),
        limit: Some(args.limit),
        follow: args.follow,
    }
}

pub(crate) fn run(ctx: &Ctx, args: &CallsArgs) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw(method::CALLS, Some(&params(args)), READ_TIMEOUT)?;
    let result: CallsResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `calls` result: {e}")))?;
    if args.json {
        output::json_line(raw.get());
    }
    let Some(sub) = result.subscription_id.filter(|_| args.follow) else {
        if !args.json {
            output::stdout(&render_calls(&result.calls, &ctx.out));
        }
        return Ok(Exit::Success);
    };
    super::logs::cancel_on_signal(client.try_clone_stream()?, method::CALLS_CANCEL, sub)?;
    let cols = CallColumns::new(&result.calls);
    if !args.json {
        let mut text = cols.header(&ctx.out);
        for c in &result.calls {
            text.push_str(&cols.line(c, &ctx.out));
        }
        output::stdout(&text);
    }
    loop {
        let note = client.next_notification(None::<Instant>)?;
        match note.method.as_str() {
            method::CALL => {
                let n: CallNotification = note.decode()?;
                if n.subscription_id != sub {
                    continue;
                }
                if args.json {
                    output::json_line(note.params.get());
                } else {
                    output::stdout(&cols.line(&n.call, &ctx.out));
                }
            }
            method::CALL_END => {
                let end: CallEndNotification = note.decode()?;
                if end.subscription_id != sub {
                    continue;
                }
                return match end.reason {
                    CallEndReason::Lagged => Err(Failure::new(
                        Exit::Operational,
                        "xyctl fell behind and xyd dropped the stream; some calls were not shown",
                    )),
                    CallEndReason::Shutdown => {
                        output::note(&ctx.err, "xyd is shutting down; stream ended");
                        Ok(Exit::Success)
                    }
                    _ => Ok(Exit::Success),
                };
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_shapes() {
        let args = CallsArgs {
            name: None,
            follow: false,
            limit: 100,
            json: false,
        };
        assert_eq!(
            serde_json::to_string(&params(&args)).unwrap(),
            r#"{"limit":100}"#
        );
        let args = CallsArgs {
            name: Some("notes".into()),
            follow: true,
            limit: 5,
            json: true,
        };
        assert_eq!(
            serde_json::to_string(&params(&args)).unwrap(),
            r#"{"name":"notes","limit":5,"follow":true}"#
        );
    }
}
