//! `auth_login`, `auth_login_wait`, `auth_status`, `auth_logout` (SPEC §23):
//! the OAuth broker's logins and grants, for the servers whose config has an
//! `auth { oauth }` block. Results and errors never carry a token.

use std::time::Duration;

use jsonrpsee::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;
use xy_actors::{Engine, OAuthError};
use xy_core::config::OAuthConfig;
use xy_core::protocol::{
    AuthLoginParams, AuthLoginWaitParams, AuthLogoutParams, AuthLogoutResult, AuthStatusParams,
    AuthStatusResult, ErrorCode, RpcError, method,
};

use super::{DaemonCtx, engine_error, invalid_params, parse, to_error_object};

/// `auth_login_wait` without `timeout_ms`.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::AUTH_LOGIN, |params, ctx, _| async move {
        let p: AuthLoginParams = parse(&params)?;
        let engine = ctx.engine().await?;
        let (url, cfg) = target_of(engine, &p.name).await?;
        engine
            .oauth()
            .login(&p.name, &url, &cfg)
            .await
            .map_err(|e| oauth_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::AUTH_LOGIN_WAIT, |params, ctx, _| async move {
        let p: AuthLoginWaitParams = parse(&params)?;
        let wait = p.timeout_ms.map_or(DEFAULT_WAIT, Duration::from_millis);
        ctx.engine()
            .await?
            .oauth()
            .login_wait(&p.login_id, wait)
            .await
            .map_err(|e| oauth_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::AUTH_STATUS, |params, ctx, _| async move {
        let p: AuthStatusParams = parse(&params)?;
        let engine = ctx.engine().await?;
        let targets: Vec<(String, String, OAuthConfig)> = match &p.name {
            Some(name) => {
                let (url, cfg) = target_of(engine, name).await?;
                vec![(name.clone(), url, cfg)]
            }
            None => engine
                .server_configs()
                .await
                .map_err(|e| engine_error(&e))?
                .iter()
                .filter_map(|c| xy_actors::oauth_target(c).map(|(u, o)| (c.name.clone(), u, o)))
                .collect(),
        };
        let mut servers = Vec::with_capacity(targets.len());
        for (name, url, cfg) in targets {
            servers.push(
                engine
                    .oauth()
                    .status(&name, &url, &cfg)
                    .await
                    .map_err(|e| oauth_error(&e))?,
            );
        }
        Ok::<_, ErrorObjectOwned>(AuthStatusResult { servers })
    })
    .expect("method names are unique");

    m.register_async_method(method::AUTH_LOGOUT, |params, ctx, _| async move {
        let p: AuthLogoutParams = parse(&params)?;
        let engine = ctx.engine().await?;
        let (url, cfg) = target_of(engine, &p.name).await?;
        let logged_out = engine
            .oauth()
            .logout(&p.name, &url, &cfg)
            .await
            .map_err(|e| oauth_error(&e))?;
        Ok::<_, ErrorObjectOwned>(AuthLogoutResult {
            name: p.name,
            logged_out,
        })
    })
    .expect("method names are unique");
}

/// `name`'s endpoint and OAuth block: `-32001` for an unknown server,
/// `-32602` for one without `auth { oauth }`.
async fn target_of(engine: &Engine, name: &str) -> Result<(String, OAuthConfig), ErrorObjectOwned> {
    let config = engine
        .server_config(name)
        .await
        .map_err(|e| engine_error(&e))?;
    xy_actors::oauth_target(&config).ok_or_else(|| {
        invalid_params(
            format!("{name} does not use OAuth (its config has no `url` with `auth {{ oauth }}`)"),
            serde_json::json!({ "field": "name", "name": name }),
        )
    })
}

fn oauth_error(e: &OAuthError) -> ErrorObjectOwned {
    let rpc = match e {
        OAuthError::LoginFailed(_) => RpcError::new(ErrorCode::AuthFailed, e.to_string()),
        OAuthError::NoSuchLogin(id) => RpcError::new(ErrorCode::InvalidParams, e.to_string())
            .with_data(serde_json::json!({ "field": "login_id", "login_id": id })),
        OAuthError::Store(_) => RpcError::new(ErrorCode::InternalError, e.to_string()),
    };
    to_error_object(rpc)
}
