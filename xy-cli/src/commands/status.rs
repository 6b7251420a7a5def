//! `xyctl status <name> [--json]`: the status page with the last log lines.

use xy_core::protocol::{NameParams, StatusResult, method};

use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

/// Log lines shown under the status page.
const STATUS_TAIL: u32 = 10;

pub(crate) fn run(ctx: &Ctx, name: &str, verbose: bool, json: bool) -> Result<Exit, Failure> {
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
    let log = client
        .log_tail(name, STATUS_TAIL, READ_TIMEOUT)
        .unwrap_or_default();
    output::stdout(&render::render_status(
        &status,
        &log,
        &render::SandboxView::from_env(verbose),
        &ctx.out,
    ));
    Ok(Exit::Success)
}
