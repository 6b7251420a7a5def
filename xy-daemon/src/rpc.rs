//! The JSON-RPC methods (SPEC §6) as a jsonrpsee [`RpcModule`], one file per
//! method group, plus the few helpers they share: params parsing that names
//! the offending field, and the single mapping of errors to error objects.
//! The streams (`logs`, `events`, `calls`) share one scaffold, `follow`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use jsonrpsee::types::{ErrorObject, ErrorObjectOwned, Params};
use jsonrpsee::{Extensions, RpcModule};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use xy_actors::{Engine, EngineError};
use xy_core::paths::Paths;
use xy_core::protocol::{BootPhase, BootProgress, ErrorCode, RpcError};

use crate::transport::{Conn, Handlers};

mod auth;
mod calls;
mod config;
mod daemon;
mod error;
mod events;
mod follow;
mod logs;
mod servers;

pub(crate) use config::reload;

/// Everything the methods share; the module's context.
#[derive(Debug)]
pub(crate) struct DaemonCtx {
    /// Set once the boot is over (after the orphan sweep); methods that need
    /// it wait for it through [`DaemonCtx::engine`].
    engine: OnceLock<Engine>,
    /// `Some` while booting; `None` once the engine is set or the boot was
    /// given up (then waiters get an error).
    boot: watch::Sender<Option<BootProgress>>,
    /// Servers in the config directory, for `daemon_status` during the boot.
    pub(crate) configured: usize,
    pub(crate) paths: Paths,
    pub(crate) pid: u32,
    pub(crate) started_at: SystemTime,
    pub(crate) started: Instant,
    next_subscription: AtomicU64,
    /// Set to true to ask the daemon to shut down (`shutdown` method).
    pub(crate) shutdown: watch::Sender<bool>,
    /// Turns true when open streams must end with `log_end {reason: shutdown}`.
    pub(crate) closing: watch::Receiver<bool>,
    /// The console (SPEC §28), once the boot started it.
    console: std::sync::Mutex<Option<crate::console::Serving>>,
}

impl DaemonCtx {
    /// A context whose engine runs already.
    pub(crate) fn new(
        engine: Engine,
        paths: Paths,
        pid: u32,
        shutdown: watch::Sender<bool>,
        closing: watch::Receiver<bool>,
    ) -> DaemonCtx {
        let ctx = DaemonCtx::booting(paths, pid, 0, Duration::ZERO, shutdown, closing);
        ctx.ready(engine);
        ctx
    }

    /// A context for a daemon that answers before its engine runs (the
    /// orphan sweep, with `grace` per orphan, comes first).
    pub(crate) fn booting(
        paths: Paths,
        pid: u32,
        configured: usize,
        grace: Duration,
        shutdown: watch::Sender<bool>,
        closing: watch::Receiver<bool>,
    ) -> DaemonCtx {
        let progress = BootProgress {
            phase: BootPhase::SweepingOrphans,
            orphans: 0,
            orphans_left: 0,
            grace_secs: grace.as_secs_f64().ceil() as u64,
        };
        DaemonCtx {
            engine: OnceLock::new(),
            boot: watch::Sender::new(Some(progress)),
            configured,
            paths,
            pid,
            started_at: SystemTime::now(),
            started: Instant::now(),
            next_subscription: AtomicU64::new(1),
            shutdown,
            closing,
            console: std::sync::Mutex::new(None),
        }
    }

    /// Keeps the console once it was started.
    pub(crate) fn set_console(&self, serving: crate::console::Serving) {
        *self
            .console
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(serving);
    }

    /// The console's state; `None` while the daemon boots and once it
    /// stopped.
    pub(crate) fn console(&self) -> Option<crate::console::ConsoleState> {
        let c = self
            .console
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.as_ref().map(crate::console::Serving::state)
    }

    /// A reload's `console { port }`.
    pub(crate) fn set_console_port(&self, port: Option<u16>) {
        let c = self
            .console
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = c.as_ref() {
            c.set_port(port);
        }
    }

    /// Closes the console's listener (shutdown).
    pub(crate) fn stop_console(&self) {
        let c = self
            .console
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(c);
    }

    /// Records the sweep's progress (from the blocking sweep thread).
    pub(crate) fn sweep_progress(&self, orphans: usize, orphans_left: usize) {
        self.boot.send_modify(|b| {
            if let Some(b) = b {
                b.orphans = orphans;
                b.orphans_left = orphans_left;
            }
        });
    }

    /// Ends the boot: from now on every method runs against `engine`.
    pub(crate) fn ready(&self, engine: Engine) {
        let _ = self.engine.set(engine);
        self.boot.send_replace(None);
    }

    /// Ends the boot without an engine (shutdown during the sweep): methods
    /// waiting for it fail instead of waiting forever.
    pub(crate) fn abandon_boot(&self) {
        self.boot.send_replace(None);
    }

    /// What the boot is doing, or `None` once it is over.
    pub(crate) fn booting_progress(&self) -> Option<BootProgress> {
        self.boot.borrow().clone()
    }

    /// The engine, waiting for the boot to end first.
    pub(crate) async fn engine(&self) -> Result<&Engine, ErrorObjectOwned> {
        if let Some(e) = self.engine.get() {
            return Ok(e);
        }
        let mut rx = self.boot.subscribe();
        let _ = rx.wait_for(Option::is_none).await;
        self.engine.get().ok_or_else(|| {
            to_error_object(RpcError::new(
                ErrorCode::InternalError,
                "xyd is shutting down before it finished booting",
            ))
        })
    }

    fn next_subscription_id(&self) -> u64 {
        self.next_subscription.fetch_add(1, Ordering::Relaxed)
    }
}

/// Builds the method table: jsonrpsee's, and the direct methods
/// (`transport/direct.rs`; `list`).
pub(crate) fn module(ctx: Arc<DaemonCtx>) -> Handlers {
    let mut m = RpcModule::from_arc(Arc::clone(&ctx));
    servers::register(&mut m);
    config::register(&mut m);
    logs::register(&mut m);
    events::register(&mut m);
    calls::register(&mut m);
    daemon::register(&mut m);
    auth::register(&mut m);
    let mut handlers = Handlers::from(jsonrpsee::Methods::from(m));
    servers::register_direct(&mut handlers, &ctx);
    handlers
}

/// Every error object the daemon sends goes through here.
pub(crate) fn to_error_object(e: RpcError) -> ErrorObjectOwned {
    ErrorObject::owned(e.code, e.message, e.data)
}

/// Engine failures, mapped in one place ([`error::engine_rpc_error`]).
pub(crate) fn engine_error(e: &EngineError) -> ErrorObjectOwned {
    to_error_object(error::engine_rpc_error(e))
}

pub(crate) fn invalid_params(
    message: impl Into<String>,
    data: serde_json::Value,
) -> ErrorObjectOwned {
    to_error_object(RpcError::new(ErrorCode::InvalidParams, message).with_data(data))
}

/// Parses by-name params (absent or `null` reads as `{}`). The error names
/// the field: its path for a wrong type, the name for a missing or unknown one.
pub(crate) fn parse<T: DeserializeOwned>(params: &Params<'_>) -> Result<T, ErrorObjectOwned> {
    let raw = params.as_str().unwrap_or("{}");
    // JSON-RPC 2.0 §4.2: params are structured. A scalar would otherwise be
    // reported with the Rust type it failed to fit ("expected struct …").
    if !matches!(
        raw.trim_start().as_bytes().first(),
        Some(b'{' | b'[') | None
    ) && raw.trim() != "null"
    {
        return Err(invalid_params(
            "invalid params: params must be an object (by name) or an array (by position)",
            serde_json::json!({ "field": null, "error": "params is not an object or array" }),
        ));
    }
    let de = &mut serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let field = if path == "." {
            field_named_in(&inner)
        } else {
            Some(path)
        };
        let message = match &field {
            Some(f) if !inner.contains(&format!("`{f}`")) => {
                format!("invalid params: {f}: {inner}")
            }
            _ => format!("invalid params: {inner}"),
        };
        invalid_params(
            message,
            serde_json::json!({ "field": field, "error": inner }),
        )
    })
}

/// The field a top-level serde message is about ("missing field `name`",
/// "unknown field `nmae`, expected `name`"). Other top-level messages
/// ("invalid type: integer `5`, expected …": params that are no object)
/// quote a value, not a field.
fn field_named_in(msg: &str) -> Option<String> {
    ["missing field ", "unknown field ", "duplicate field "]
        .iter()
        .any(|p| msg.starts_with(p))
        .then(|| backticked(msg))
        .flatten()
}

/// First `` `name` `` in a serde message.
fn backticked(msg: &str) -> Option<String> {
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    Some(msg[start..start + len].to_owned())
}

/// `names: []` for a stream (`logs`, `events`): a `-32602`, not "every
/// server", which is what leaving `names` out means; a script whose filter
/// matched nothing must not get everything.
pub(crate) fn no_empty_names(names: Option<&[String]>) -> Result<(), ErrorObjectOwned> {
    match names {
        Some([]) => Err(invalid_params(
            "invalid params: names is empty; leave it out for every server",
            serde_json::json!({ "field": "names", "error": "empty list" }),
        )),
        _ => Ok(()),
    }
}

/// For methods without params: absent, `null`, `{}` and `[]` are accepted.
pub(crate) fn no_params(params: &Params<'_>) -> Result<(), ErrorObjectOwned> {
    match params.as_str().map(str::trim) {
        None | Some("{}" | "[]" | "null") => Ok(()),
        Some(other) => match serde_json::from_str::<serde_json::Value>(other) {
            Ok(serde_json::Value::Object(o)) if o.is_empty() => Ok(()),
            Ok(serde_json::Value::Array(a)) if a.is_empty() => Ok(()),
            _ => Err(invalid_params(
                "invalid params: this method takes no params",
                serde_json::json!({ "field": null, "error": "unexpected params" }),
            )),
        },
    }
}

/// The calling connection (always present: the transport inserts it).
pub(crate) fn conn(ext: &Extensions) -> Result<Arc<Conn>, ErrorObjectOwned> {
    ext.get::<Arc<Conn>>().cloned().ok_or_else(|| {
        to_error_object(RpcError::new(
            ErrorCode::InternalError,
            "no connection context",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_core::protocol::{NameParams, TargetParams};

    fn params(s: &str) -> Params<'_> {
        Params::new(Some(s))
    }

    fn data(e: &ErrorObjectOwned) -> serde_json::Value {
        serde_json::from_str(e.data().unwrap().get()).unwrap()
    }

    #[test]
    fn parse_names_the_field() {
        let e = parse::<NameParams>(&params(r#"{"name": 5}"#)).unwrap_err();
        assert_eq!(e.code(), -32602);
        assert_eq!(data(&e)["field"], "name");
        assert!(e.message().contains("name"), "{}", e.message());

        let e = parse::<NameParams>(&params("{}")).unwrap_err();
        assert_eq!(data(&e)["field"], "name");
        assert!(
            e.message().contains("missing field `name`"),
            "{}",
            e.message()
        );

        let e = parse::<NameParams>(&params(r#"{"name":"a","nmae":"b"}"#)).unwrap_err();
        assert_eq!(data(&e)["field"], "nmae");

        let e = parse::<TargetParams>(&params(r#"{"names":["a", 3]}"#)).unwrap_err();
        assert_eq!(data(&e)["field"], "names[1]");

        // Params that are no object name no field (not the value `5`).
        let e = parse::<NameParams>(&params("5")).unwrap_err();
        assert_eq!(e.code(), -32602);
        assert_eq!(data(&e)["field"], serde_json::Value::Null, "{e:?}");
        assert!(!e.message().contains("struct"), "{}", e.message());
        let e = parse::<NameParams>(&params(r#""a""#)).unwrap_err();
        assert_eq!(data(&e)["field"], serde_json::Value::Null, "{e:?}");

        assert_eq!(
            parse::<NameParams>(&params(r#"{"name":"a"}"#))
                .unwrap()
                .name,
            "a"
        );
        assert!(
            parse::<TargetParams>(&Params::new(None))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn no_params_accepts_only_empty() {
        assert!(no_params(&Params::new(None)).is_ok());
        assert!(no_params(&params("{}")).is_ok());
        assert!(no_params(&params(" [ ] ")).is_ok());
        assert!(no_params(&params(r#"{"x":1}"#)).is_err());
    }
}
