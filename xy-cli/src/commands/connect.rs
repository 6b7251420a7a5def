//! `xyctl connect <name>`: finds the server's xy URL (starting the daemon
//! if needed), then hands stdin/stdout to [`crate::relay`]. Exit 0 when
//! stdin closes; 1 for an unknown server; 2 when xyd cannot be reached.

use xy_core::protocol::{NameParams, StatusResult, method};

use super::add::server_url;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, relay};

pub(crate) fn run(ctx: &Ctx, name: &str) -> Result<Exit, Failure> {
    let url = {
        let mut c = daemon_conn::connect(ctx)?;
        let status: StatusResult = c.call(
            method::STATUS,
            Some(&NameParams {
                name: name.to_owned(),
            }),
            READ_TIMEOUT,
        )?;
        server_url(&status.entry)
    };
    relay::run(&url);
    Ok(Exit::Success)
}
