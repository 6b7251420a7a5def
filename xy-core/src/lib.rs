//! `xy-core`: the vocabulary shared by `xyd` and `xyctl`.
//!
//! - [`paths`]: where configs, logs, the socket and the pidfile live (SPEC §2).
//! - [`config`]: the KDL server config, its validation and diagnostics (SPEC §3).
//! - [`protocol`]: JSON-RPC method names, params, results, notifications and
//!   error codes (SPEC §6).
//! - [`firewall`]: the tool firewall's modes, states and digest (SPEC §20).
//! - [`package`]: pinned installs' `package` references and install records
//!   (SPEC §22).
//! - [`remote`]: remote servers' `url`, `headers` and `auth` (SPEC §23).
//! - [`time`]: durations and timestamps as xy writes them.
//! - `client` (feature `client`): the one blocking JSON-line client of the
//!   socket, for `xyctl`, the integration tests and the benches.
//!
//! No tokio and no I/O beyond reading config files (and, with `client`, the
//! socket). `xy-actors` and
//! `xy-daemon` build on it; `xy-cli` depends on it alone.
#![warn(missing_docs)]

#[cfg(feature = "client")]
pub mod client;
pub mod config;
pub mod firewall;
pub mod package;
pub mod paths;
pub mod protocol;
pub mod sandbox;
pub mod time;

/// The version both binaries report and compare (version-skew warning).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
