//! `xyctl sandbox test <name> [--json]` (SPEC §21): asks the daemon to run
//! the exfiltration probes in a child confined exactly as the server's
//! next spawn would be, prints what got through, and exits 0 only when
//! every outcome is what the server's rules say (1 otherwise), so a
//! script or CI job can hold a server to its block.

use xy_core::client::ClientError;
use xy_core::protocol::{ErrorCode, SandboxTestParams, SandboxTestResult, method};

use crate::cli::SandboxCmd;
use crate::ctx::{CONTROL_TIMEOUT, Ctx};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

pub(crate) fn run(ctx: &Ctx, cmd: &SandboxCmd) -> Result<Exit, Failure> {
    match cmd {
        SandboxCmd::Test { name, json } => test(ctx, name, json.json),
    }
}

fn test(ctx: &Ctx, name: &str, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let params = SandboxTestParams {
        name: name.to_owned(),
    };
    let raw = match client.call_raw(method::SANDBOX_TEST, Some(&params), CONTROL_TIMEOUT) {
        Ok(raw) => raw,
        Err(ClientError::Rpc(e)) if e.kind() == Some(ErrorCode::MethodNotFound) => {
            return Err(Failure::new(
                Exit::Operational,
                "this xyd does not run sandbox probes yet; `xyctl daemon restart` after \
                 upgrading it"
                    .to_owned(),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let result: SandboxTestResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `sandbox_test` result: {e}")))?;
    let home = std::env::home_dir();
    if json {
        output::json_line(raw.get());
    } else {
        output::stdout(&render::render_sandbox_test(
            &result,
            home.as_deref(),
            &ctx.out,
        ));
    }
    Ok(
        if render::sandbox_verdict(&result, home.as_deref()).mismatches == 0 {
            Exit::Success
        } else {
            Exit::Operational
        },
    )
}
