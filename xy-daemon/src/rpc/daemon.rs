//! `daemon_status` and `shutdown`: facts about the daemon itself, and the
//! graceful exit, which starts only after its `{}` reply has been written;
//! `console_code`: the console's one-time code (SPEC §28); `clients`: the
//! AI clients' config files as `xyctl clients` reads them.

use jsonrpsee::ResponsePayload;
use jsonrpsee::RpcModule;
use xy_core::protocol::{DaemonStatus, PROTOCOL_VERSION, ShutdownResult, method};

use super::{DaemonCtx, engine_error, no_params, to_error_object};
use crate::console::ConsoleState;
use xy_core::protocol::{ErrorCode, RpcError};

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::DAEMON_STATUS, |params, ctx, _| async move {
        no_params(&params)?;
        // Answered during the boot too: that is how a client tells a busy
        // daemon from a wedged one.
        let (servers, boot, gateway) = match ctx.booting_progress() {
            Some(progress) => (ctx.configured, Some(progress), None),
            None => {
                let engine = ctx.engine().await?;
                let n = engine.server_count().await.map_err(|e| engine_error(&e))?;
                let gateway = engine.gateway_status().await;
                (n, None, gateway)
            }
        };
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(DaemonStatus {
            version: xy_core::VERSION.to_owned(),
            protocol: PROTOCOL_VERSION,
            pid: ctx.pid,
            started_at: xy_core::time::rfc3339_ms(ctx.started_at),
            uptime_secs: ctx.started.elapsed().as_secs(),
            socket: ctx.paths.socket.display().to_string(),
            config_dir: ctx.paths.config_dir.display().to_string(),
            log_dir: ctx.paths.log_dir.display().to_string(),
            servers,
            boot,
            gateway,
        })
    })
    .expect("method names are unique");

    m.register_async_method(method::CONSOLE_CODE, |params, ctx, _| async move {
        no_params(&params)?;
        // The console starts after the engine: wait for the boot.
        ctx.engine().await?;
        match ctx.console() {
            Some(ConsoleState::On(c)) => Ok(c.code()),
            Some(ConsoleState::Failed(why)) => Err(to_error_object(RpcError::new(
                ErrorCode::InternalError,
                format!("the console is not listening: {why}; xyd tries again (free the port, or set another with `console {{ port N }}` in xy.kdl and run `xyctl reload`)"),
            ))),
            Some(ConsoleState::Off) => Err(to_error_object(RpcError::new(
                ErrorCode::InvalidRequest,
                "the console is off (`console { port 0 }` in xy.kdl): set a port and run `xyctl reload`",
            ))),
            None => Err(to_error_object(RpcError::new(
                ErrorCode::InternalError,
                "the console has not started yet",
            ))),
        }
    })
    .expect("method names are unique");

    m.register_async_method(method::CLIENTS, |params, ctx, _| async move {
        no_params(&params)?;
        let engine = ctx.engine().await?;
        let list = engine.list().await.map_err(|e| engine_error(&e))?;
        let gateway = engine.gateway_status().await.map(|g| g.url);
        // Reading a few small files, off the runtime's threads.
        let found = tokio::task::spawn_blocking(move || {
            let Some(home) = xy_core::clients::Home::from_env() else {
                return Vec::new();
            };
            let xy = xy_core::clients::xy_urls(&list);
            xy_core::clients::find(
                &home,
                xy_core::clients::Os::current(),
                &xy,
                gateway.as_deref(),
            )
        })
        .await
        .unwrap_or_default();
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(xy_core::protocol::ClientsResult {
            clients: found,
        })
    })
    .expect("method names are unique");

    m.register_async_method(method::SHUTDOWN, |params, ctx, _| async move {
        if let Err(e) = no_params(&params) {
            return ResponsePayload::error(e);
        }
        let (payload, written) =
            ResponsePayload::success(ShutdownResult::default()).notify_on_completion();
        tokio::spawn(async move {
            // Resolves once the reply is queued ahead of anything the
            // shutdown writes; also when it is never sent (a notification):
            // a notification is still executed.
            let _ = written.await;
            tracing::info!("shutdown requested over RPC");
            ctx.shutdown.send_replace(true);
        });
        payload
    })
    .expect("method names are unique");
}
