//! `reload`: read the config directory again and apply the difference. An
//! invalid directory changes nothing (the old config keeps running).

use std::sync::Arc;

use jsonrpsee::RpcModule;
use xy_core::config::ConfigErrors;
use xy_core::protocol::{ConfigInvalidData, ErrorCode, ReloadResult, RpcError, method};

use super::{DaemonCtx, no_params, to_error_object};
use crate::boot::load_configs;
use crate::error::{DaemonError, errors_count};

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::RELOAD, |params, ctx, _| async move {
        no_params(&params)?;
        reload(&ctx).await.map_err(to_error_object)
    })
    .expect("method names are unique");
}

/// Loads the config directory and hands it to the engine, both under the
/// engine's one reload lock. Shared by the `reload` method and SIGHUP.
pub(crate) async fn reload(ctx: &Arc<DaemonCtx>) -> Result<ReloadResult, RpcError> {
    let engine = ctx
        .engine()
        .await
        .map_err(|e| RpcError::new(ErrorCode::InternalError, e.message().to_owned()))?;
    let load = async {
        let configs = match load_configs(&ctx.paths).await {
            Ok(c) => c,
            Err(DaemonError::Config(errors)) => {
                let e = config_error(&errors);
                tracing::warn!(
                    "reload rejected, the running config is kept: {}\n{}",
                    e.message,
                    errors.render(false)
                );
                return Err(e);
            }
            Err(other) => return Err(RpcError::new(ErrorCode::InternalError, other.to_string())),
        };
        for w in &configs.warnings {
            tracing::warn!(server = %w.name, file = %w.file.display(), "{}", w.message);
        }
        // Like the gateway's, the console's port follows the file (D302).
        ctx.set_console_port(configs.settings.console.port());
        Ok(configs)
    };
    let result = engine
        .reload_with(load, |e| super::error::engine_rpc_error(&e))
        .await?;
    tracing::info!(
        added = ?result.added,
        removed = ?result.removed,
        changed = ?result.changed,
        unchanged = result.unchanged.len(),
        "config reloaded"
    );
    Ok(result)
}

/// `-32002` when duplicate ports are the only problem, else `-32003`; the
/// data carries the diagnostics both structured and rendered.
fn config_error(errors: &ConfigErrors) -> RpcError {
    let n = errors.diagnostics.len();
    let (code, message) = if errors.only_port_conflicts() {
        (
            ErrorCode::PortConflict,
            format!("port conflict: {}", errors_count(n)),
        )
    } else {
        (
            ErrorCode::ConfigInvalid,
            format!("config invalid: {}", errors_count(n)),
        )
    };
    let data = serde_json::to_value(ConfigInvalidData::new(errors)).unwrap_or_default();
    RpcError::new(code, message).with_data(data)
}
