//! `xy-actors`: the supervision engine behind `xyd`.
//!
//! The daemon talks to it through [`Engine`], a cloneable handle over the
//! ractor actor tree (RootSupervisor → ConfigActor, LogRouterActor, one
//! ServerActor per server, a BridgeActor under each stdio server; the
//! GatewayActor beside the tree). Depends on `xy-core`; `xy-daemon` sits
//! above it. Besides the engine it exposes what the daemon needs at boot
//! and for its own log: [`become_subreaper`], [`sweep_orphans`] and
//! [`RotatingWriter`]. `docs/architecture.md` describes the tree, message
//! flows and shutdown, and maps every file.
//!
//! # Layout
//!
//! Three floors. A module imports only from its own floor's lower rooms
//! or from a floor below; a child may use its parent.
//!
//! The tree (the actors and what they own):
//!
//! * `engine`: the public handle, each operation a bounded call; reload,
//!   shutdown, resource figures, the sandbox test.
//! * `supervisor`: the RootSupervisor, the registry of every server's ref
//!   and snapshot, and restoring a failed child actor.
//! * `config_actor`: the ConfigActor, the applied configuration and the
//!   reload diff.
//! * `log_router`: the LogRouterActor, every server's log sink (ring,
//!   rotating file, followers), the pumps and redaction.
//! * `server`: the ServerActor: lifecycle (the pure `next`), spawning,
//!   restarts, health glue, the firewall's decisions, status.
//! * `snapshot`: what a server publishes for readers that send no message
//!   (`list`, the gateway, its bridge).
//! * `events`: the event bus. `explain`: the crash-loop explainer.
//!   `hooks`: hook commands and desktop notifications.
//!
//! The wings (each a way servers are reached):
//!
//! * `bridge`: the BridgeActor serving a stdio child over HTTP (routing,
//!   eras, MRTR, sessions, the stdin budget).
//! * `gateway`: the GatewayActor, one listener for every server, the
//!   reverse proxy and its firewall, and the aggregate (`/mcp`, every
//!   server's tools as one MCP server, SPEC §26).
//! * `health`: the probes (`http`, `tcp`, `mcp`, `command`), the
//!   health verdict, and xy's own listing of an HTTP or remote server in
//!   the probe's MCP session.
//! * `remote`: a remote server's upstream. `credentials`: what it asks of
//!   the OAuth broker. `oauth`: the broker, logins and the grant stores.
//!
//! The ground (shared vocabulary, no actor, imports no wing):
//!
//! * `mcp`: what an MCP message is to xy: listings, report, verdicts,
//!   call records, `_meta` keys, the one id helper, and the one strict
//!   reader of a message (`strict`, SPEC §24).
//! * `http`: what an HTTP exchange is: the body type and limits, header
//!   names, the outbound client, the admission edge.
//! * `os`: process groups and trees, records, ports, peers (and which
//!   server a peer process belongs to), limits, resources, spawn errors,
//!   the sandbox and its egress proxy.
//! * `calls`: the call records, in memory and on disk. `ledger`: the tool
//!   ledger file. `logs`: what a log reader sees. `secrets`: secret
//!   lookups at each spawn.
//! * `writers`: the disk-writer threads log files and call records share.
//!   `atomic_file`: the one way a state file is replaced.
#![warn(missing_docs)]

mod atomic_file;
mod bridge;
mod calls;
mod config_actor;
mod credentials;
mod engine;
mod events;
mod explain;
mod gateway;
mod health;
mod hooks;
mod http;
mod ledger;
mod log_router;
mod logs;
mod mcp;
mod oauth;
mod os;
mod remote;
mod secrets;
mod server;
mod snapshot;
mod supervisor;
mod writers;

pub use calls::{Calls, CallsRead, LiveCall};
pub use engine::{Engine, EngineError, EngineOptions};
pub use events::{EngineEvent, EventItem, EventSubscription};
pub use http::edge::{AcceptBackoff, ConsoleBody, ConsoleListening, listen_console};
pub use log_router::flush_logs;
pub use log_router::rotating::RotatingWriter;
pub use logs::{LogEvent, LogLine, LogSubscription};
pub use oauth::{AuthEvent, OAuthBroker, OAuthError, OAuthOptions, TokenStoreKind, oauth_target};
pub use os::group::become_subreaper;
pub use os::limits::{NofileLimit, raise_nofile_limit};
pub use os::peer::process::is_confined_process;
pub use os::ports::PortHolder;
pub use os::records::{SweptOrphan, sweep_orphans, sweep_orphans_reporting};
pub use os::tree::reap_adopted_forever;
pub use server::failure::{SecretFailure, SpawnFailure};
