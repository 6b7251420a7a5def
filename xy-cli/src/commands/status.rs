//! `xyctl status <name> [--json]`: the status page with the last log lines.

use std::time::Instant;

use xy_core::protocol::{
    LogEndNotification, LogNotification, LogsParams, LogsResult, NameParams, StatusResult, method,
};

use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};
use xy_core::client::{Client, ClientError};

/// Log lines shown under the status page.
const STATUS_TAIL: u32 = 10;

pub(crate) fn run(ctx: &Ctx, name: &str, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let params = NameParams {
        name: name.to_owned(),
    };
    let raw = client.call_raw(method::STATUS, Some(&params), READ_TIMEOUT)?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let status: StatusResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `status` result: {e}")))?;
    // The log tail is a garnish: a failure to fetch it must not hide the status.
    let log = tail(&mut client, name, STATUS_TAIL).unwrap_or_default();
    output::stdout(&render::render_status(&status, &log, &ctx.out));
    Ok(Exit::Success)
}

/// The buffered last `n` lines of one server (a non-follow `logs` call).
pub(crate) fn tail(
    client: &mut Client,
    name: &str,
    n: u32,
) -> Result<Vec<LogNotification>, ClientError> {
    let params = LogsParams {
        name: Some(name.to_owned()),
        tail: Some(n),
        ..LogsParams::default()
    };
    let sub: LogsResult = client.call(method::LOGS, Some(&params), READ_TIMEOUT)?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut lines = Vec::new();
    loop {
        let note = client.next_notification(Some(deadline))?;
        match note.method.as_str() {
            method::LOG => {
                let l: LogNotification = note.decode()?;
                if l.subscription_id == sub.subscription_id {
                    lines.push(l);
                }
            }
            method::LOG_END => {
                let e: LogEndNotification = note.decode()?;
                if e.subscription_id == sub.subscription_id {
                    return Ok(lines);
                }
            }
            _ => {}
        }
    }
}
