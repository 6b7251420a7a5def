//! `xy-actors`: the supervision engine behind `xyd`.
//!
//! The daemon talks to it through [`Engine`], a cloneable handle over the
//! ractor actor tree (RootSupervisor → ConfigActor, LogRouterActor, one
//! ServerActor per server). Depends on `xy-core`; `xy-daemon` sits above it.
//!
//! Besides the engine it exposes what the daemon needs at boot and for its
//! own log: [`become_subreaper`], [`sweep_orphans`] and [`RotatingWriter`].
//! `docs/architecture.md` describes the tree, message flows and shutdown.
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

pub use calls::{Calls, CallsRead, LiveCall};
pub use engine::{Engine, EngineError, EngineOptions};
pub use events::{EngineEvent, EventItem, EventSubscription};
pub use http::edge::AcceptBackoff;
pub use log_router::flush_logs;
pub use log_router::rotating::RotatingWriter;
pub use logs::{LogEvent, LogLine, LogSubscription};
pub use oauth::{AuthEvent, OAuthBroker, OAuthError, OAuthOptions, TokenStoreKind, oauth_target};
pub use os::group::become_subreaper;
pub use os::limits::{NofileLimit, raise_nofile_limit};
pub use os::ports::PortHolder;
pub use os::records::{SweptOrphan, sweep_orphans, sweep_orphans_reporting};
pub use server::failure::{SecretFailure, SpawnFailure};
