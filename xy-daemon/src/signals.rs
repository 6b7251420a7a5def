//! Process signals: SIGTERM/SIGINT request a graceful shutdown (a second
//! SIGINT or SIGTERM during it kills every child's process group and exits
//! at once), SIGHUP reloads the config directory like the `reload` method.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// Set once a second signal has started killing every group: the graceful
/// path may then finish first (its children just died) and must still end
/// with exit 130, not 0.
static FORCED: AtomicBool = AtomicBool::new(false);

/// Whether a second signal forced the exit (see [`shutdown_requested`]).
pub fn forced() -> bool {
    FORCED.load(Ordering::Acquire)
}

/// Resolves on the first SIGTERM or SIGINT; from then on, a second one ends
/// the process immediately (exit 130) for a user who will not wait out a
/// long grace period — after SIGKILLing the process group of every child
/// recorded in `run_dir`, so nothing xy started outlives it.
pub async fn shutdown_requested(run_dir: PathBuf) {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!(
            "cannot install SIGTERM/SIGINT handlers; only the shutdown method stops xyd"
        );
        return std::future::pending().await;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    tracing::info!(
        signal = name,
        "shutting down (send it again to exit at once)"
    );
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        FORCED.store(true, Ordering::Release);
        tracing::warn!(
            signal = name,
            "second signal during shutdown: killing every child's process group and exiting now"
        );
        // The child records name every live group (with its start time, so
        // a reused pid is never signalled); no grace: SIGKILL at once.
        let killed = tokio::task::spawn_blocking(move || {
            xy_actors::sweep_orphans(&run_dir, Duration::ZERO).len()
        })
        .await
        .unwrap_or(0);
        tracing::warn!(groups = killed, "exiting");
        std::process::exit(130);
    });
}

/// A stream of SIGHUPs (one message each); empty if the handler cannot be
/// installed.
pub fn hangups() -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(1);
    match signal(SignalKind::hangup()) {
        Ok(mut hup) => {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    // A full channel means a reload is already queued.
                    let _ = tx.try_send(());
                }
            });
        }
        Err(e) => tracing::warn!(error = %e, "cannot install the SIGHUP handler"),
    }
    rx
}
