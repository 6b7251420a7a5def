//! `xy-daemon`: the `xyd` daemon as a library, so tests and `main` share one
//! boot path.
//!
//! Layout: [`boot`] (paths, state dirs, lock, configs, socket), [`lock`]
//! (the pidfile flock), `transport` (line framing, connections, dispatch
//! into jsonrpsee), `rpc` (the methods), [`logging`] (tracing to stderr and
//! `daemon.log`), [`signals`]. Below it: `xy-actors` (the engine) and
//! `xy-core` (paths, config, protocol types).
//!
//! `main` calls [`boot::prepare`], [`logging::init`], then [`run`].

use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use xy_actors::{Engine, EngineOptions};
use xy_core::config::{ConfigSet, DEFAULT_GRACE};

pub mod boot;
mod error;
pub mod lock;
pub mod logging;
mod rpc;
pub mod signals;
mod transport;

pub use boot::{Prepared, prepare};
pub use error::DaemonError;

/// How long shutdown waits for open connections to flush their last lines.
const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

/// Runs a prepared daemon: sweeps orphans, loads the configs, binds the
/// socket, starts every server, and serves until `shutdown` resolves or a
/// client calls `shutdown`. Each message on `reload` reloads the config
/// directory (SIGHUP). Then stops every server, ends open log streams,
/// removes the socket and the pidfile (if still ours). `Ok` means exit 0.
pub async fn run(
    prepared: Prepared,
    shutdown: impl Future<Output = ()> + Send,
    mut reload: mpsc::Receiver<()>,
) -> Result<(), DaemonError> {
    let Prepared { paths, lock } = prepared;
    if let Err(e) = xy_actors::become_subreaper() {
        tracing::warn!(error = %e, "cannot become child subreaper; orphaned grandchildren may linger as zombies");
    }
    let loaded = boot::load_configs(&paths.config_dir).await;
    let grace = match &loaded {
        Ok(c) if !c.servers.is_empty() => c.max_grace(),
        _ => DEFAULT_GRACE,
    };
    sweep(&paths.run_dir, grace).await;
    let configs = match loaded {
        Ok(c) => c,
        Err(DaemonError::Config(errors)) => {
            tracing::error!(
                config_dir = %paths.config_dir.display(),
                "config invalid: {} errors\n{}",
                errors.diagnostics.len(),
                errors.render(false)
            );
            lock.release();
            return Err(DaemonError::Config(errors));
        }
        Err(e) => {
            lock.release();
            return Err(e);
        }
    };
    log_warnings(&configs);

    let listener = match boot::bind_socket(&paths.socket) {
        Ok(l) => l,
        Err(e) => {
            lock.release();
            return Err(e);
        }
    };
    let socket_id = socket_identity(&paths.socket);
    let n_servers = configs.servers.len();
    let opts = EngineOptions::new(&paths.log_dir, &paths.run_dir);
    let engine = match Engine::start(configs, opts).await {
        Ok(e) => e,
        Err(e) => {
            remove_socket(&paths.socket, socket_id);
            lock.release();
            return Err(DaemonError::Engine(e));
        }
    };

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (closing_tx, closing_rx) = watch::channel(false);
    let ctx = Arc::new(rpc::DaemonCtx::new(
        engine.clone(),
        paths.clone(),
        lock.pid(),
        shutdown_tx.clone(),
        closing_rx.clone(),
    ));
    let methods = rpc::module(Arc::clone(&ctx));
    let server = tokio::spawn(transport::serve(
        listener,
        methods.into(),
        shutdown_rx.clone(),
        closing_rx,
    ));
    tracing::info!(
        version = xy_core::VERSION,
        pid = lock.pid(),
        socket = %paths.socket.display(),
        config_dir = %paths.config_dir.display(),
        servers = n_servers,
        "xyd ready"
    );

    let mut requested = shutdown_rx;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            () = until_set(&mut requested) => break,
            Some(()) = reload.recv() => {
                tracing::info!("SIGHUP: reloading the config directory");
                // Errors are logged inside; the old config keeps running.
                let _ = rpc::reload(&ctx).await;
            }
        }
    }

    // 1. Stop accepting; 2. stop every server; 3. end streams and close
    // connections; 4. remove the socket and the pidfile.
    shutdown_tx.send_replace(true);
    tracing::info!("shutting down: stopping every server");
    let slots = server.await.ok();
    if let Err(e) = engine.shutdown().await {
        tracing::error!(error = %e, "engine shutdown failed");
    }
    closing_tx.send_replace(true);
    if let Some(slots) = slots {
        let all = u32::try_from(transport::MAX_CONNECTIONS).unwrap_or(u32::MAX);
        if tokio::time::timeout(DRAIN_DEADLINE, slots.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close in time");
        }
    }
    remove_socket(&paths.socket, socket_id);
    lock.release();
    tracing::info!("xyd stopped");
    Ok(())
}

/// Serves one client over any byte stream (an in-memory
/// `tokio::io::duplex` in fuzzers and tests), exactly as a socket
/// connection is served: the same line framing, limits, dispatch and
/// methods, against `engine` (`paths` feeds `daemon_status` and `reload`).
/// Resolves once the connection is closed: the input ended and every reply
/// and log stream has been written. A `shutdown` call is answered but stops
/// nothing.
pub async fn serve_stream<S>(engine: Engine, paths: xy_core::paths::Paths, stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (shutdown_tx, _) = watch::channel(false);
    let (_closing_tx, closing_rx) = watch::channel(false);
    let ctx = Arc::new(rpc::DaemonCtx::new(
        engine,
        paths,
        std::process::id(),
        shutdown_tx,
        closing_rx.clone(),
    ));
    let methods: jsonrpsee::Methods = rpc::module(ctx).into();
    let permit = Arc::new(tokio::sync::Semaphore::new(1))
        .try_acquire_owned()
        .expect("a fresh semaphore has a permit");
    let (read, write) = tokio::io::split(stream);
    transport::connection(0, read, write, methods, closing_rx, permit).await;
}

/// Resolves once the flag is true (or its sender is gone). Drops the watch
/// guard before returning, so callers stay `Send` across later awaits.
pub(crate) async fn until_set(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|v| *v).await;
}

async fn sweep(run_dir: &Path, grace: Duration) {
    let dir = run_dir.to_path_buf();
    let swept = tokio::task::spawn_blocking(move || xy_actors::sweep_orphans(&dir, grace))
        .await
        .unwrap_or_default();
    for o in &swept {
        tracing::warn!(
            server = %o.name,
            pid = o.pid,
            pgid = o.pgid,
            command = %o.command,
            killed = o.killed,
            "stopped an orphaned server left by a previous daemon"
        );
    }
}

fn log_warnings(configs: &ConfigSet) {
    for w in &configs.warnings {
        tracing::warn!(server = %w.name, file = %w.file.display(), "{}", w.message);
    }
}

/// (device, inode) of the socket we bound, so shutdown removes only ours.
fn socket_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

fn remove_socket(path: &Path, ours: Option<(u64, u64)>) {
    if ours.is_some()
        && socket_identity(path) == ours
        && let Err(e) = std::fs::remove_file(path)
    {
        tracing::warn!(socket = %path.display(), error = %e, "could not remove the socket");
    }
}
