//! `xyctl reload [--json]`: an invalid config is rejected by the daemon with
//! `-32003` (exit 3, diagnostics printed), a port clash with `-32002` (exit 1).

use xy_core::protocol::{ReloadResult, method};

use crate::ctx::{CONTROL_TIMEOUT, Ctx};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

pub(crate) fn run(ctx: &Ctx, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw::<()>(method::RELOAD, None, CONTROL_TIMEOUT)?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let r: ReloadResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `reload` result: {e}")))?;
    output::stdout(&render::render_reload(&r, &ctx.out));
    Ok(Exit::Success)
}
