//! The `list` view of one server: the [`ServerSnapshot`] a ServerActor
//! publishes into a `watch` channel (read by `list`, the gateway and a
//! bridge without a message to the actor) and its serialised row cache.
//! The ServerActor's publishing is `server/publish.rs`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use xy_core::config::ServerConfig;
use xy_core::protocol::{Health, LastExit, ListEntry, ListRow, ServerState, Transport};

/// What `list` shows of one server. The ServerActor is its only writer: it
/// publishes a new value into a `watch` channel whenever one of these
/// changes, and the root reads every server's latest value for `list`
/// without a message per server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerSnapshot {
    pub(crate) state: ServerState,
    pub(crate) pid: Option<u32>,
    pub(crate) port: u16,
    pub(crate) transport: Transport,
    /// `http://127.0.0.1:<port><path>`.
    pub(crate) url: String,
    /// A remote server's configured `url` (SPEC §23).
    pub(crate) remote_url: Option<String>,
    /// Spawn time of the running child; uptime is computed when read.
    pub(crate) started: Option<Instant>,
    pub(crate) restart_count: u32,
    pub(crate) last_exit: Option<LastExit>,
    pub(crate) health: Health,
    pub(crate) tool_count: Option<u32>,
    /// Tools and prompts the firewall holds back.
    pub(crate) tools_held: u32,
    pub(crate) agent_allow_restart: bool,
    /// The stop grace the engine's stop waits are bounded by.
    pub(crate) grace: Duration,
    /// A child runs or is on its way ([`Lifecycle::child_coming`]): a stdio
    /// server's requests wait for it. Not shown by `list`.
    ///
    /// [`Lifecycle::child_coming`]: crate::server::lifecycle::Lifecycle::child_coming
    pub(crate) child_coming: bool,
    /// A stdio server's bridge, for the gateway (SPEC §20). Not shown by
    /// `list`.
    pub(crate) bridge: Option<BridgeGate>,
    /// The server's firewall verdicts as its ServerActor publishes them:
    /// the gateway's proxy decides an HTTP server's traffic with them
    /// without a message to the actor. Not shown by `list`.
    pub(crate) firewall: Option<FirewallGate>,
    /// A remote server's upstream while xy holds one (SPEC §23), for the
    /// gateway and the server's own port. Not shown by `list`.
    pub(crate) remote: Option<RemoteGate>,
    /// This snapshot's `list` row, serialised once (D41): every new
    /// snapshot starts with an empty cache, so it cannot go stale.
    pub(crate) row: RowCache,
}

/// How the gateway reaches a stdio server's bridge: as a request on its own
/// port would, while that port is open.
#[derive(Clone)]
pub(crate) struct BridgeGate {
    pub(crate) endpoint: crate::bridge::http::Endpoint,
    /// The bridge listens on the server's own port now: the gateway serves
    /// the server exactly then.
    pub(crate) listening: bool,
}

/// A receiver of one server's [`Verdicts`](crate::mcp::verdicts::Verdicts),
/// and how the gateway asks for a new listing of an HTTP server (its
/// answer to a client listed an item xy's listing does not have).
#[derive(Clone)]
pub(crate) struct FirewallGate {
    pub(crate) verdicts: watch::Receiver<Arc<crate::mcp::verdicts::Verdicts>>,
    pub(crate) relist: Arc<tokio::sync::Notify>,
    /// An HTTP server's log and its secrets' redactor: a denial it reports
    /// only in a tool result is written there, where `status` finds
    /// denials (D222). `None` for other transports.
    pub(crate) log: Option<crate::gateway::firewall::ServerLog>,
}

impl FirewallGate {
    /// The verdicts in force now.
    pub(crate) fn current(&self) -> Arc<crate::mcp::verdicts::Verdicts> {
        Arc::clone(&self.verdicts.borrow())
    }
}

impl PartialEq for FirewallGate {
    fn eq(&self, other: &FirewallGate) -> bool {
        self.verdicts.same_channel(&other.verdicts)
    }
}

impl std::fmt::Debug for FirewallGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FirewallGate")
    }
}

impl BridgeGate {
    pub(crate) fn key(&self) -> (ractor::ActorId, bool) {
        (self.endpoint.actor.get_id(), self.listening)
    }
}

impl PartialEq for BridgeGate {
    fn eq(&self, other: &BridgeGate) -> bool {
        self.key() == other.key()
    }
}

impl std::fmt::Debug for BridgeGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeGate")
            .field("actor", &self.endpoint.actor.get_id())
            .field("listening", &self.listening)
            .finish()
    }
}

/// A remote server's upstream of the current run; equal only to itself.
#[derive(Clone, Debug)]
pub(crate) struct RemoteGate(pub(crate) Arc<crate::remote::Upstream>);

impl PartialEq for RemoteGate {
    fn eq(&self, other: &RemoteGate) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for RemoteGate {
    type Target = Arc<crate::remote::Upstream>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// A [`ListRow`] built at most once per snapshot. Not part of a snapshot's
/// equality: it follows from the other fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowCache(OnceLock<Arc<ListRow>>);

impl PartialEq for RowCache {
    fn eq(&self, _: &RowCache) -> bool {
        true
    }
}

impl ServerSnapshot {
    /// A server not started yet.
    pub(crate) fn initial(config: &ServerConfig) -> ServerSnapshot {
        ServerSnapshot {
            state: ServerState::Stopped,
            pid: None,
            port: config.port,
            transport: config.transport,
            url: config.url(),
            remote_url: config.remote.as_ref().map(|r| r.url.clone()),
            started: None,
            restart_count: 0,
            last_exit: None,
            health: Health::default(),
            tool_count: None,
            tools_held: 0,
            agent_allow_restart: config.agent.allow_restart,
            grace: config.stop.grace,
            child_coming: false,
            bridge: None,
            firewall: None,
            remote: None,
            row: RowCache::default(),
        }
    }

    /// The `list` row of this snapshot without its per-call fields, built
    /// on first use.
    pub(crate) fn row(&self, name: &str) -> &Arc<ListRow> {
        self.row
            .0
            .get_or_init(|| Arc::new(ListRow::new(&self.entry(name))))
    }

    /// The `list` row, uptime as of now (resource figures are added by the
    /// engine).
    pub(crate) fn entry(&self, name: &str) -> ListEntry {
        ListEntry {
            name: name.to_owned(),
            state: self.state,
            pid: self.pid,
            port: self.port,
            transport: self.transport,
            url: self.url.clone(),
            uptime_secs: self.started.map(|t| t.elapsed().as_secs()),
            restart_count: self.restart_count,
            last_exit: self.last_exit.clone(),
            health: self.health.clone(),
            cpu_percent: None,
            rss_bytes: None,
            tool_count: self.tool_count,
            tools_held: self.tools_held,
            agent_allow_restart: self.agent_allow_restart,
            remote_url: self.remote_url.clone(),
            // The engine's: it follows the daemon's settings.
            gateway_url: None,
        }
    }
}
