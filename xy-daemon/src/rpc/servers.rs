//! `list`, `status`, `start`, `stop`, `restart`, `sandbox_test` (and, in debug builds, the
//! hidden `_debug_panic` fault injection): thin calls into the engine.

use std::sync::Arc;

use jsonrpsee::RpcModule;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use xy_core::protocol::{NameParams, TargetParams, method};

use super::{DaemonCtx, engine_error, invalid_params, no_params, parse};
use crate::transport::Handlers;

/// `list` writes its reply directly: the rows each snapshot serialised
/// once, with their per-call fields (`transport/direct.rs`, D41).
pub(super) fn register_direct(h: &mut Handlers, ctx: &Arc<DaemonCtx>) {
    let ctx = Arc::clone(ctx);
    h.register_direct(method::LIST, move |params| {
        let ctx = Arc::clone(&ctx);
        async move {
            no_params(&params)?;
            ctx.engine()
                .await?
                .list_rows()
                .await
                .map_err(|e| engine_error(&e))
        }
    });
}

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::STATUS, |params, ctx, _| async move {
        let p: NameParams = parse(&params)?;
        ctx.engine()
            .await?
            .status(&p.name)
            .await
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::SANDBOX_TEST, |params, ctx, _| async move {
        let p: xy_core::protocol::SandboxTestParams = parse(&params)?;
        ctx.engine()
            .await?
            .sandbox_test(&p.name, &ctx.paths.socket)
            .await
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::TOOLS, |params, ctx, _| async move {
        let p: xy_core::protocol::mcp::ToolsParams = parse(&params)?;
        ctx.engine()
            .await?
            .tools(&p.name)
            .await
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::TOOLS_APPROVE, |params, ctx, _| async move {
        let p: xy_core::protocol::mcp::ToolsApproveParams = parse(&params)?;
        let tools = p.tools.unwrap_or_default();
        if !p.expect.is_empty() && (!tools.is_empty() || p.all) {
            return Err(crate::rpc::invalid_params(
                "invalid params: expect names the items itself; drop tools and all",
                serde_json::json!({ "field": "expect", "error": "given with tools or all" }),
            ));
        }
        if tools.is_empty() && !p.all && p.expect.is_empty() {
            return Err(crate::rpc::invalid_params(
                "invalid params: name the tools to approve, or set all",
                serde_json::json!({ "field": "tools", "error": "no tools named and all is false" }),
            ));
        }
        ctx.engine()
            .await?
            .tools_approve(&p.name, tools, p.all, p.expect)
            .await
            .map(|approved| xy_core::protocol::mcp::ToolsApproveResult { approved })
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::TOOLS_SEARCH, |params, ctx, _| async move {
        let p: xy_core::protocol::aggregate::ToolsSearchParams = parse(&params)?;
        ctx.engine().await?.tools_search(&p).await.map_err(|why| {
            crate::rpc::invalid_params(
                format!("invalid params: {why}"),
                serde_json::json!({ "field": "profile", "error": why }),
            )
        })
    })
    .expect("method names are unique");

    m.register_async_method(method::TOOLS_DENY, |params, ctx, _| async move {
        let p: xy_core::protocol::mcp::ToolsDenyParams = parse(&params)?;
        if p.tools.is_empty() {
            return Err(crate::rpc::invalid_params(
                "invalid params: name the tools to deny",
                serde_json::json!({ "field": "tools", "error": "empty" }),
            ));
        }
        ctx.engine()
            .await?
            .tools_deny(&p.name, p.tools)
            .await
            .map(|denied| xy_core::protocol::mcp::ToolsDenyResult { denied })
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::START, |params, ctx, _| async move {
        let target = target(&params)?;
        ctx.engine()
            .await?
            .start_servers(&target)
            .await
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::STOP, |params, ctx, _| async move {
        let target = target(&params)?;
        ctx.engine()
            .await?
            .stop_servers(&target)
            .await
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    m.register_async_method(method::RESTART, |params, ctx, _| async move {
        let target = target(&params)?;
        ctx.engine()
            .await?
            .restart_servers(&target)
            .await
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");

    #[cfg(debug_assertions)]
    m.register_async_method(DEBUG_PANIC, |params, ctx, _| async move {
        let p: NameParams = parse(&params)?;
        tracing::warn!(server = %p.name, "fault injection: panicking the server actor");
        ctx.engine()
            .await?
            .inject_panic(&p.name)
            .await
            .map(|()| serde_json::json!({}))
            .map_err(|e| engine_error(&e))
    })
    .expect("method names are unique");
}

/// Hidden fault-injection method, registered in debug builds only.
#[cfg(debug_assertions)]
pub(crate) const DEBUG_PANIC: &str = "_debug_panic";

/// `{name}`, `{names}` or `{all: true}`; naming nothing, or names beside
/// `all: true` (which would win silently), is a `-32602`.
fn target(params: &Params<'_>) -> Result<TargetParams, ErrorObjectOwned> {
    let t: TargetParams = parse(params)?;
    if t.is_empty() {
        return Err(invalid_params(
            "invalid params: name one server (name), several (names), or all (all: true)",
            serde_json::json!({ "field": "name", "error": "no target given" }),
        ));
    }
    if t.all && (t.name.is_some() || t.names.is_some()) {
        return Err(invalid_params(
            "invalid params: all: true targets every server; do not also give name or names",
            serde_json::json!({ "field": "all", "error": "all combined with name or names" }),
        ));
    }
    Ok(t)
}
