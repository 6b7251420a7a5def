//! `xyctl tools <name> [--json]`: the server's tools and what changed since
//! the previous start, from the daemon's tool ledger.

use xy_core::protocol::mcp::{ToolsParams, ToolsResult};
use xy_core::protocol::method;

use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

pub(crate) fn run(ctx: &Ctx, name: &str, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let params = ToolsParams {
        name: name.to_owned(),
    };
    let raw = client.call_raw(method::TOOLS, Some(&params), READ_TIMEOUT)?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let result: ToolsResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `tools` result: {e}")))?;
    output::stdout(&render::render_tools(&result, &ctx.out));
    Ok(Exit::Success)
}
