//! `xyctl list [--json]`, then the hint about unpinned servers
//! ([`crate::packages::unpinned`]).

use xy_core::protocol::{ListEntry, method};

use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

pub(crate) fn run(ctx: &Ctx, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw::<()>(method::LIST, None, READ_TIMEOUT)?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let entries: Vec<ListEntry> = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `list` result: {e}")))?;
    output::stdout(&render::render_list(&entries, &ctx.out));
    if let Some(hint) = crate::packages::unpinned::hint(&mut client) {
        output::stderr(&hint);
    }
    Ok(Exit::Success)
}
