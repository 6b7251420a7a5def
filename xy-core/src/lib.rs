//! `xy-core`: the vocabulary shared by `xyd` and `xyctl` — paths, the
//! config, the wire protocol, and the rules both must apply the same way.
//! `xy-actors` and `xy-daemon` build on it; `xy-cli` depends on it alone.
//!
//! # Layout
//!
//! From the ground up; each module imports only from those above it, except
//! that `sandbox::probe` reports in `protocol`'s types
//! (`tests/layering.rs` checks that no files import each other in a circle):
//!
//! - [`time`]: durations and timestamps as xy writes them.
//! - [`paths`]: where configs, `xy.kdl`, logs, the socket and the pidfile
//!   live (SPEC §2).
//! - [`firewall`]: the tool firewall's modes, states, digest and scan
//!   (SPEC §20).
//! - [`sandbox`]: the `sandbox` block, the effective rules, the macOS
//!   profile, denials read from a child's errors, and the exfiltration
//!   probes (SPEC §21).
//! - [`protocol`]: the JSON-RPC wire contract (SPEC §6): method names,
//!   params, results, notifications, error codes and error data.
//! - [`package`]: pinned installs' `package` references and install records
//!   (SPEC §22).
//! - [`config`]: the KDL server files and `xy.kdl` — types, validation,
//!   diagnostics and loading (SPEC §3, §16–§23, remote servers included).
//! - [`clients`]: AI clients' config files read — where each client keeps
//!   its file, its server entries, what each uses (SPEC §14, §28); shared
//!   by `xyctl clients` and the console.
//! - [`tls`]: the TLS crypto provider both binaries install (not macOS).
//! - [`search`]: tool search (SPEC §26): the ranking behind `find_tools`
//!   and `xyctl tools search`, and the optional static-embedding model.
//! - `client` (feature `client`): the one blocking JSON-line client of the
//!   socket, for `xyctl`, the integration tests and the benches.
//!
//! # I/O
//!
//! No tokio and no async; most of the crate is pure data and functions.
//! What I/O it does is blocking and small:
//!
//! - `config` reads the config directory, `xy.kdl` and `env-file`s, and
//!   looks at the file system for its warnings (is `command` an executable
//!   on the PATH, is `working-dir` a directory);
//! - `paths` reads the environment (the XDG variables, `XY_SOCKET`, the
//!   home directory);
//! - `package` reads a version directory's install record;
//! - `clients` reads the AI clients' config files in the home directory;
//! - `search` reads the static-embedding model file a user names;
//! - `sandbox::probe` opens, reads and writes files and connects sockets:
//!   the probes themselves, run by a confined child;
//! - `client` talks to the daemon over its socket.
#![warn(missing_docs)]

#[cfg(feature = "client")]
pub mod client;
pub mod clients;
pub mod config;
pub mod firewall;
pub mod package;
pub mod paths;
pub mod protocol;
pub mod sandbox;
pub mod search;
pub mod time;
pub mod tls;

/// The version both binaries report and compare (version-skew warning).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
