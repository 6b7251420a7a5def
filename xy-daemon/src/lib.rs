//! `xy-daemon`: the `xyd` daemon as a library, so tests and `main` share one
//! boot path. It owns the process (boot, lock, signals, its own log, its
//! allocator policy) and the control socket (transport and the JSON-RPC
//! methods); everything a server does is the engine's, in `xy-actors`.
//! Below it: `xy-actors` (the engine) and `xy-core` (paths, config,
//! protocol types).
//!
//! # Layout
//!
//! The process:
//! - [`boot`]: paths, state dirs, lock, descriptor limit, configs, socket;
//!   [`lock`]: the pidfile flock; `error` ([`DaemonError`]): why xyd stops and
//!   its exit code.
//! - [`signals`]: TERM/INT shut down, HUP reloads; `flag`: the one-way
//!   shutdown and closing flags every long-lived task selects on.
//! - [`logging`]: tracing to stderr and `daemon.log`; [`heap`]: the glibc
//!   allocator policy; [`probe`]: the hidden `--sandbox-probe` mode.
//!
//! The socket:
//! - `transport`: accept, cap, peer check, line framing, one writer per
//!   connection, dispatch into the method table.
//! - `rpc`: the methods, one file per group; `rpc/follow.rs` is the one
//!   stream scaffold behind `logs`, `events` and `calls` (subscription id,
//!   backlog then live items, the bounded buffer, the lagged drop, the end
//!   notification); `rpc/error.rs` the one engine-error mapping.
//!
//! The console:
//! - `console`: the web page on loopback (SPEC §28), its sessions, and an
//!   allow-list of the methods above, called through an in-memory
//!   connection to the same transport.
//!
//! `main` calls [`boot::prepare`], [`logging::init`], then [`run`].

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use xy_actors::{Engine, EngineOptions};
use xy_core::config::{ConfigSet, DEFAULT_GRACE};

pub mod boot;
mod console;
mod error;
mod flag;
pub mod heap;
pub mod lock;
pub mod logging;
pub mod probe;
mod rpc;
pub mod signals;
mod transport;

pub use boot::{Prepared, prepare};
pub use error::DaemonError;
use flag::until_set;

/// How long shutdown waits for open connections to flush their last lines.
const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

/// Runs a prepared daemon: loads the configs, binds the socket, sweeps the
/// orphans of a previous daemon (the socket answers `daemon_status` with the
/// boot's progress meanwhile; other methods wait), starts every server, and
/// serves until `shutdown` resolves or a client calls `shutdown`. Each
/// message on `reload` reloads the config directory (SIGHUP); a shutdown
/// during a reload is not held up by it. Then stops every server and ends
/// open log streams. The socket and the pidfile (if still ours) are removed
/// by their guards on every way out. `Ok` means exit 0.
pub async fn run(
    prepared: Prepared,
    shutdown: impl Future<Output = ()> + Send,
    mut reload: mpsc::Receiver<()>,
) -> Result<(), DaemonError> {
    // Dropped last, on every return: removes the pidfile, releases the flock.
    let Prepared { paths, lock } = prepared;
    boot::raise_fd_limit();
    if let Err(e) = xy_actors::become_subreaper() {
        tracing::warn!(error = %e, "cannot become child subreaper; orphaned grandchildren may linger as zombies");
    }
    // What xyd adopts (a daemonised grandchild whose parent died) is reaped
    // as it ends, not left a zombie until the next stop.
    tokio::spawn(xy_actors::reap_adopted_forever());
    let loaded = boot::load_configs(&paths).await;
    let grace = match &loaded {
        Ok(c) if !c.servers.is_empty() => c.max_grace(),
        _ => DEFAULT_GRACE,
    };
    let configs = match loaded {
        Ok(c) => c,
        Err(e) => {
            // A broken config must not leave a crashed daemon's children
            // running either; nobody is served, so no socket for this one.
            sweep(&paths.run_dir, grace, |_, _| {}).await;
            if let DaemonError::Config(errors) = &e {
                tracing::error!(
                    config_dir = %paths.config_dir.display(),
                    "config invalid: {}\n{}",
                    crate::error::errors_count(errors.diagnostics.len()),
                    errors.render(false)
                );
            }
            return Err(e);
        }
    };
    log_warnings(&configs);

    // Dropped before `lock`: removes the socket file if it is still ours.
    let (listener, _socket) = boot::bind_socket(&paths.socket)?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (closing_tx, closing_rx) = watch::channel(false);
    let ctx = Arc::new(rpc::DaemonCtx::booting(
        paths.clone(),
        lock.pid(),
        configs.servers.len(),
        grace,
        shutdown_tx.clone(),
        closing_rx.clone(),
    ));
    let methods = rpc::module(Arc::clone(&ctx));
    let console_port = configs.settings.console.port();
    let console_methods = methods.clone();
    let console_closing = closing_rx.clone();
    let serving = Serving {
        server: tokio::spawn(transport::serve(
            listener,
            methods,
            shutdown_rx.clone(),
            closing_rx,
        )),
        shutdown_tx,
        closing_tx,
    };

    let mut requested = shutdown_rx;
    tokio::pin!(shutdown);
    let progress = Arc::clone(&ctx);
    let swept = sweep(&paths.run_dir, grace, move |found, left| {
        progress.sweep_progress(found, left);
    });
    tokio::pin!(swept);
    let stop_early = tokio::select! {
        () = &mut swept => false,
        () = &mut shutdown => true,
        () = until_set(&mut requested) => true,
    };
    if stop_early {
        tracing::info!(
            "shutdown requested during the boot: finishing the orphan sweep; no server starts"
        );
        swept.await;
        ctx.abandon_boot();
        serving.stop(None).await;
        tracing::info!("xyd stopped");
        return Ok(());
    }

    let n_servers = configs.servers.len();
    let mut opts = EngineOptions::new(&paths.log_dir, &paths.run_dir);
    opts.server_data_dir = paths.server_data_root();
    // The broker is built once: a changed URL applies at the next start.
    opts.oauth
        .client_metadata_url
        .clone_from(&configs.settings.oauth_client_metadata_url);
    // Off macOS a Secret Service on the session bus is preferred to the
    // file store; asking the bus blocks, so not on this thread.
    if let xy_actors::TokenStoreKind::File(dir) = &opts.oauth.store {
        let dir = dir.clone();
        if let Ok(store) =
            tokio::task::spawn_blocking(move || xy_actors::TokenStoreKind::detect(dir)).await
        {
            opts.oauth.store = store;
        }
    }
    tracing::info!(store = %opts.oauth.store.describe(), "OAuth grant store");
    let engine = match Engine::start(configs, opts).await {
        Ok(e) => e,
        Err(e) => {
            ctx.abandon_boot();
            serving.stop(None).await;
            return Err(DaemonError::Engine(e));
        }
    };
    ctx.ready(engine.clone());
    // After the engine: a page opened now finds every method answering.
    ctx.set_console(console::start(
        console_port,
        console_methods,
        console_closing,
    ));
    tracing::info!(
        version = xy_core::VERSION,
        pid = lock.pid(),
        socket = %paths.socket.display(),
        config_dir = %paths.config_dir.display(),
        servers = n_servers,
        "xyd ready"
    );

    loop {
        tokio::select! {
            () = &mut shutdown => break,
            () = until_set(&mut requested) => break,
            Some(()) = reload.recv() => {
                tracing::info!("SIGHUP: reloading the config directory");
                // Errors are logged inside; the old config keeps running. A
                // shutdown meanwhile drops the reload where it stands (its
                // locks with it); the engine's shutdown then stops whatever
                // the reload had started.
                tokio::select! {
                    _ = rpc::reload(&ctx) => {}
                    () = &mut shutdown => break,
                    () = until_set(&mut requested) => break,
                }
            }
        }
    }

    tracing::info!("shutting down: stopping every server");
    ctx.stop_console();
    serving.stop(Some(&engine)).await;
    tracing::info!("xyd stopped");
    Ok(())
}

/// The socket being served, and the switches that wind it down.
struct Serving {
    server: tokio::task::JoinHandle<Arc<tokio::sync::Semaphore>>,
    shutdown_tx: watch::Sender<bool>,
    closing_tx: watch::Sender<bool>,
}

impl Serving {
    /// Stops accepting, stops every server, then ends streams and lets the
    /// connections flush and close (bounded). The socket file and the
    /// pidfile go with their guards.
    async fn stop(self, engine: Option<&Engine>) {
        self.shutdown_tx.send_replace(true);
        let slots = self.server.await.ok();
        if let Some(engine) = engine
            && let Err(e) = engine.shutdown().await
        {
            tracing::error!(error = %e, "engine shutdown failed");
        }
        self.closing_tx.send_replace(true);
        if let Some(slots) = slots {
            let all = u32::try_from(transport::MAX_CONNECTIONS).unwrap_or(u32::MAX);
            if tokio::time::timeout(DRAIN_DEADLINE, slots.acquire_many(all))
                .await
                .is_err()
            {
                tracing::warn!("some connections did not close in time");
            }
        }
    }
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
    let methods = rpc::module(ctx);
    let permit = Arc::new(tokio::sync::Semaphore::new(1))
        .try_acquire_owned()
        .expect("a fresh semaphore has a permit");
    let (read, write) = tokio::io::split(stream);
    transport::connection(0, read, write, methods, closing_rx, permit).await;
}

/// The orphan sweep on the blocking pool; `progress(found, left)` is called
/// from there as groups go.
async fn sweep(
    run_dir: &Path,
    grace: Duration,
    progress: impl FnMut(usize, usize) + Send + 'static,
) {
    let dir = run_dir.to_path_buf();
    let swept = tokio::task::spawn_blocking(move || {
        xy_actors::sweep_orphans_reporting(&dir, grace, progress)
    })
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
