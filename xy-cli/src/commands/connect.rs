//! `xyctl connect <name>`: finds the server's xy URL (starting the daemon
//! if needed), then hands stdin/stdout to [`crate::relay`]. `xyctl connect
//! --one [--profile P]` does the same for the aggregate (SPEC §26): the
//! gateway's `/mcp`, or `/p/<P>/mcp`. Exit 0 when stdin closes; 1 for an
//! unknown server or a gateway that is off; 2 when xyd cannot be reached.

use xy_core::protocol::{DaemonStatus, NameParams, StatusResult, method};

use super::add::server_url;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, relay};

pub(crate) fn run(
    ctx: &Ctx,
    name: Option<&str>,
    one: bool,
    profile: Option<&str>,
) -> Result<Exit, Failure> {
    let url = {
        let mut c = daemon_conn::connect(ctx)?;
        match name {
            Some(name) if !one => {
                let status: StatusResult = c.call(
                    method::STATUS,
                    Some(&NameParams {
                        name: name.to_owned(),
                    }),
                    READ_TIMEOUT,
                )?;
                server_url(&status.entry)
            }
            _ => aggregate_url(&mut c, profile)?,
        }
    };
    relay::run(&url);
    Ok(Exit::Success)
}

/// The aggregate's URL (`/mcp`, or a profile's `/p/<P>/mcp`) on the
/// running daemon's gateway.
pub(crate) fn aggregate_url(
    c: &mut xy_core::client::Client,
    profile: Option<&str>,
) -> Result<String, Failure> {
    let status: DaemonStatus = c.call::<(), _>(method::DAEMON_STATUS, None, READ_TIMEOUT)?;
    let Some(gw) = status.gateway else {
        return Err(Failure::new(
            Exit::Operational,
            "the gateway is off (xy.kdl: gateway { port 0 }); the aggregate is served there"
                .to_owned(),
        ));
    };
    let base = gw.url.trim_end_matches('/');
    Ok(match profile {
        Some(p) => format!("{base}/p/{p}/mcp"),
        None => format!("{base}/mcp"),
    })
}
