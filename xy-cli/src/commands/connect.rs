//! `xyctl connect <name>`: finds the server's xy URL (starting the daemon
//! if needed), then hands stdin/stdout to [`crate::relay`]. Exit 0 when
//! stdin closes; 1 for an unknown server; 2 when xyd cannot be reached.

use xy_core::protocol::{NameParams, method};

use super::add::server_url;
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, relay};

pub(crate) fn run(ctx: &Ctx, name: &str) -> Result<Exit, Failure> {
    let url = {
        let mut c = daemon_conn::connect(ctx)?;
        let raw = c.call_raw(
            method::STATUS,
            Some(&NameParams {
                name: name.to_owned(),
            }),
            READ_TIMEOUT,
        )?;
        let v: serde_json::Value = serde_json::from_str(raw.get())
            .map_err(|e| Failure::new(Exit::Operational, format!("bad `status` result: {e}")))?;
        let port = v["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| Failure::new(Exit::Operational, "`status` has no port".to_owned()))?;
        server_url(&v, port)
    };
    relay::run(&url);
    Ok(Exit::Success)
}
