//! `xyctl events [NAME...] [--json]`: prints every state, health, tools and
//! config change as it happens, one line each (NDJSON with `--json`), until
//! Ctrl-C, which cancels the stream politely and exits 0.

use std::time::Instant;

use xy_core::protocol::{
    EventEndNotification, EventEndReason, EventNotification, EventsParams, EventsResult, ListEntry,
    method,
};

use crate::cli::EventsArgs;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::render::render_event;
use crate::{daemon_conn, output};

/// The `events` params for the names given (none: every server).
pub(crate) fn params(names: &[String]) -> EventsParams {
    EventsParams {
        names: (!names.is_empty()).then(|| names.to_vec()),
    }
}

pub(crate) fn run(ctx: &Ctx, args: &EventsArgs) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let width = if args.json {
        0
    } else if args.names.is_empty() {
        let all: Vec<ListEntry> = client.call::<(), _>(method::LIST, None, READ_TIMEOUT)?;
        all.iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(0)
    } else {
        args.names
            .iter()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0)
    };
    let sub: EventsResult =
        client.call(method::EVENTS, Some(&params(&args.names)), READ_TIMEOUT)?;
    super::logs::cancel_on_signal(
        client.try_clone_stream()?,
        method::EVENTS_CANCEL,
        sub.subscription_id,
    )?;
    loop {
        let note = client.next_notification(None::<Instant>)?;
        match note.method.as_str() {
            method::EVENT => {
                if args.json {
                    output::json_line(note.params.get());
                    continue;
                }
                let e: EventNotification = note.decode()?;
                if e.subscription_id == sub.subscription_id {
                    output::stdout(&render_event(&e, width, &ctx.out));
                }
            }
            method::EVENT_END => {
                let end: EventEndNotification = note.decode()?;
                if end.subscription_id != sub.subscription_id {
                    continue;
                }
                return match end.reason {
                    EventEndReason::Lagged => Err(Failure::new(
                        Exit::Operational,
                        "xyctl fell behind and xyd dropped the stream; some events were lost",
                    )),
                    EventEndReason::Shutdown => {
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
        assert_eq!(serde_json::to_string(&params(&[])).unwrap(), "{}");
        assert_eq!(
            serde_json::to_string(&params(&["a".into(), "b".into()])).unwrap(),
            r#"{"names":["a","b"]}"#
        );
    }
}
