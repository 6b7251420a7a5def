//! xy's own listing of an HTTP server (SPEC §20): after each spawn, a task
//! waits for the child to answer MCP (the `mcp` probe's client, either
//! era; no `health` block needed), lists its tools and prompts whole, and
//! hands the [`Listing`] to the ServerActor, which decides the firewall's
//! verdicts exactly as for a stdio server's bridge listing. Then it waits:
//! when the gateway's proxy sees the child list an item xy's listing does
//! not have (the child changed; its own `list_changed` goes to its
//! clients, not to xy), it is woken and lists again (wake-ups meanwhile
//! coalesce into one). The task ends with the spawn ([`Lister`] dropped),
//! and holds a 2025 session only while it lists.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::ServerMsg;
use crate::health::mcp::McpClient;
use crate::mcp::listing::Listing;

/// How long a new child has to start answering MCP before xy gives up
/// listing it for this spawn (its traffic is then decided by the policy).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);
/// Bound on one probe and on the whole listing.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// First wait between probes of a child not answering yet; doubles up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// Shortest time between two listings of one spawn: a child whose answers
/// never match xy's listing (an item without a name, say) would otherwise
/// be listed again at every client's `tools/list`.
const RELIST_GAP: Duration = Duration::from_secs(1);

/// The listing task of one spawn; dropping this stops it (it ends its
/// 2025 session, if one is open, on its way out).
#[derive(Debug)]
pub(super) struct Lister {
    stop: oneshot::Sender<()>,
    /// Closed when the task has ended (its session with it).
    done: oneshot::Receiver<()>,
}

impl Lister {
    /// Stops the task; the future ends once it has ended its session, so
    /// the child is signalled only after (like the `mcp` probe's).
    pub(super) fn stop(self) -> impl Future<Output = ()> + Send + 'static {
        drop(self.stop);
        let done = self.done;
        async move {
            let _ = done.await;
        }
    }
}

/// Starts the listing of spawn `run` of the child at `port` (`path`), or
/// of a remote server's upstream.
pub(super) fn spawn(
    me: ActorRef<ServerMsg>,
    run: u64,
    port: u16,
    path: String,
    remote: Option<Arc<crate::remote::Upstream>>,
    relist: Arc<Notify>,
) -> Lister {
    let (tx, mut stop) = oneshot::channel::<()>();
    let (done_tx, done) = oneshot::channel::<()>();
    tokio::spawn(async move {
        // Dropped when the task ends, however it ends.
        let _done = done_tx;
        let mut client = match remote {
            Some(up) => McpClient::remote(port, up),
            None => McpClient::new(port, path),
        };
        loop {
            let listed = tokio::select! {
                _ = &mut stop => break,
                r = list(&mut client) => r,
            };
            // A 2025 session is held only while listing: the server is
            // not left with one per spawn.
            let _ = tokio::time::timeout(PROBE_TIMEOUT, client.close()).await;
            match listed {
                Ok(listing) => {
                    let sent = me.cast(ServerMsg::HttpListed {
                        run,
                        listing: Box::new(listing),
                    });
                    if sent.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::warn!(port, "xy could not list the server's tools: {e}"),
            }
            let at = Instant::now();
            tokio::select! {
                _ = &mut stop => return,
                () = async {
                    relist.notified().await;
                    tokio::time::sleep_until(at + RELIST_GAP).await;
                } => {}
            }
        }
        let _ = tokio::time::timeout(PROBE_TIMEOUT, client.close()).await;
    });
    Lister { stop: tx, done }
}

async fn list(client: &mut McpClient) -> Result<Listing, String> {
    let deadline = Instant::now() + ANSWER_WITHIN;
    let mut wait = RETRY_FIRST;
    loop {
        let why = match tokio::time::timeout(PROBE_TIMEOUT, client.probe()).await {
            Ok(Ok(_)) => break,
            Ok(Err(e)) => e,
            Err(_) => "no answer".to_owned(),
        };
        if Instant::now() + wait > deadline {
            return Err(format!(
                "it did not answer MCP within {}: {why}",
                humantime::format_duration(ANSWER_WITHIN)
            ));
        }
        // Backing off between attempts, not waiting for a state.
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY_MAX);
    }
    tokio::time::timeout(LIST_TIMEOUT, client.list_items())
        .await
        .map_err(|_| {
            format!(
                "no complete listing within {}",
                humantime::format_duration(LIST_TIMEOUT)
            )
        })?
}
