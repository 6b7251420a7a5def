//! The daemon's one-way flags: `watch<bool>` channels that go from `false`
//! to `true` once, the shutdown request (a signal, the `shutdown` method)
//! and the closing of connections and streams. Every long-lived task selects
//! on one of them through [`until_set`].

use tokio::sync::watch;

/// Resolves once the flag is true (or its sender is gone). Drops the watch
/// guard before returning, so callers stay `Send` across later awaits.
pub(crate) async fn until_set(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|v| *v).await;
}
