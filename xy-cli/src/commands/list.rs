//! `xyctl list [--json]`.

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
    if entries.is_empty() {
        output::stdout(FIRST_RUN_HINT);
    } else {
        output::stdout(&render::render_list(&entries, &ctx.out));
    }
    Ok(Exit::Success)
}

/// What `list` says when no server is configured yet (SPEC §14).
pub(crate) const FIRST_RUN_HINT: &str = "\
No servers yet. Add one:
  xyctl add <name> -- <command> [args...]          an HTTP server (`{port}` in args: its port)
  xyctl add <name> --stdio -- <command> [args...]  a stdio server, served over HTTP by xy
Or bring the ones your AI clients already run:
  xyctl import claude-desktop                      (also: claude-code, cursor, vscode, windsurf, codex)
";
