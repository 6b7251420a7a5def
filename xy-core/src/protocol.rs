//! The JSON-RPC wire contract between `xyd` and its clients (SPEC §6): every
//! type that crosses the socket, re-exported here, so both binaries use the
//! same ones and nothing about the wire format is written twice. Pure data:
//! no I/O.
//!
//! This file holds the method names ([`method`]), the protocol version and
//! line limit, and what `list`, `status`, `start`/`stop`/`restart`,
//! `reload`, `daemon_status` and `shutdown` carry. Beside it: the envelope
//! and error codes (`rpc.rs`); the streams (`logs.rs`, `events.rs`,
//! `calls.rs`); the `data` of errors (`failure.rs` for spawn failures,
//! `diagnostic.rs` for config diagnostics); one file per part of `status`
//! and its methods (`transport.rs`, `secrets.rs`, `sandbox.rs`,
//! `package.rs`, `remote.rs`, `auth.rs`, [`mcp`]); `console.rs` (the
//! console's one-time code); `boot.rs`, `exit.rs`
//! and `list_row.rs` (a `list` row serialised ahead of time); `aggregate`
//! (the aggregate endpoint's names, `tools_search`).

use std::fmt;

use serde::{Deserialize, Serialize};

mod rpc;
pub use rpc::{ErrorCode, Incoming, Request, RpcError};
mod logs;
pub use logs::{
    LogEndNotification, LogEndReason, LogNotification, LogStream, LogsCancelParams,
    LogsCancelResult, LogsParams, LogsResult,
};
mod events;
pub use events::*;
mod calls;
pub use calls::*;
mod transport;
pub use transport::{DEFAULT_MCP_PATH, Transport, endpoint_url};
mod secrets;
pub use secrets::SecretInfo;
mod package;
mod sandbox;
pub use package::PackageStatus;
pub use sandbox::{ProbeOutcome, ProbeResult, SandboxStatus, SandboxTestParams, SandboxTestResult};
mod remote;
pub use remote::{RemoteHeader, RemoteStatus};
pub mod aggregate;
mod auth;
pub use auth::{
    AuthGrantInfo, AuthLoginParams, AuthLoginResult, AuthLoginWaitParams, AuthLoginWaitResult,
    AuthLogoutParams, AuthLogoutResult, AuthState, AuthStatusEntry, AuthStatusParams,
    AuthStatusResult, ClientIdKind,
};
mod console;
pub use console::{
    CONSOLE_CODE_TTL_SECS, ClientEntry, ClientFile, ClientsResult, ConsoleCodeResult,
};
mod diagnostic;
pub use diagnostic::{ConfigInvalidData, DiagnosticData, DiagnosticKind};
mod failure;
pub use failure::{PortHolder, SecretFailure, SpawnErrorKind, SpawnFailedData, SpawnFailure};

/// Protocol revision reported by `daemon_status`; bumped on incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest accepted request line, newline excluded (SPEC §6).
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

mod exit;
pub use exit::describe_exit;
mod boot;
pub use boot::{BootPhase, BootProgress};
mod list_row;
pub use list_row::{ListRow, ListRows, PER_CALL_MAX, PerCall};

/// Method and notification names. No other place spells them.
pub mod method {
    /// `list` → `[ListEntry]`
    pub const LIST: &str = "list";
    /// `status {name}` → [`super::StatusResult`]
    pub const STATUS: &str = "status";
    /// `start {name|names|all}` → [`super::StartResult`]
    pub const START: &str = "start";
    /// `stop {name|names|all}` → [`super::StopResult`]
    pub const STOP: &str = "stop";
    /// `restart {name|names|all}` → [`super::RestartResult`]
    pub const RESTART: &str = "restart";
    /// `reload` → [`super::ReloadResult`]
    pub const RELOAD: &str = "reload";
    /// `logs {name|names, tail?, follow?}` → [`super::LogsResult`], then notifications
    pub const LOGS: &str = "logs";
    /// `logs_cancel {subscription_id}` → [`super::LogsCancelResult`]
    pub const LOGS_CANCEL: &str = "logs_cancel";
    /// `daemon_status` → [`super::DaemonStatus`]
    pub const DAEMON_STATUS: &str = "daemon_status";
    /// `shutdown` → `{}`
    pub const SHUTDOWN: &str = "shutdown";
    /// `tools {name}` → [`super::mcp::ToolsResult`]
    pub const TOOLS: &str = "tools";
    /// `tools_approve {name, tools?, all?}` → [`super::mcp::ToolsApproveResult`]
    pub const TOOLS_APPROVE: &str = "tools_approve";
    /// `tools_deny {name, tools}` → [`super::mcp::ToolsDenyResult`]
    pub const TOOLS_DENY: &str = "tools_deny";
    /// `sandbox_test {name}` → [`super::SandboxTestResult`]
    pub const SANDBOX_TEST: &str = "sandbox_test";
    /// `auth_login {name}` → [`super::AuthLoginResult`]
    pub const AUTH_LOGIN: &str = "auth_login";
    /// `auth_login_wait {login_id, timeout_ms?}` → [`super::AuthLoginWaitResult`]
    pub const AUTH_LOGIN_WAIT: &str = "auth_login_wait";
    /// `auth_status {name?}` → [`super::AuthStatusResult`]
    pub const AUTH_STATUS: &str = "auth_status";
    /// `auth_logout {name}` → [`super::AuthLogoutResult`]
    pub const AUTH_LOGOUT: &str = "auth_logout";
    /// A one-time code for the console (`xyctl ui`, SPEC §28); served on
    /// the control socket only, never through the console itself.
    pub const CONSOLE_CODE: &str = "console_code";
    /// `tools_search {query, server?, limit?, profile?}` →
    /// [`super::aggregate::ToolsSearchResult`]
    pub const TOOLS_SEARCH: &str = "tools_search";
    /// Notification carrying one log line ([`super::LogNotification`]).
    pub const LOG: &str = "log";
    /// Notification closing a log stream ([`super::LogEndNotification`]).
    pub const LOG_END: &str = "log_end";
    /// `events {names?}` → [`super::EventsResult`], then `event` notifications
    pub const EVENTS: &str = "events";
    /// `events_cancel {subscription_id}` → [`super::EventsCancelResult`]
    pub const EVENTS_CANCEL: &str = "events_cancel";
    /// Notification carrying one change ([`super::EventNotification`]).
    pub const EVENT: &str = "event";
    /// Notification closing an event stream ([`super::EventEndNotification`]).
    pub const EVENT_END: &str = "event_end";
    /// `calls {name?, limit?, follow?}` → [`super::CallsResult`], then `call` notifications
    pub const CALLS: &str = "calls";
    /// `calls_cancel {subscription_id}` → [`super::CallsCancelResult`]
    pub const CALLS_CANCEL: &str = "calls_cancel";
    /// `clients` → [`super::ClientsResult`]: the AI clients' config files
    /// and what each entry uses (SPEC §14, §28).
    pub const CLIENTS: &str = "clients";
    /// Notification carrying one call record ([`super::CallNotification`]).
    pub const CALL: &str = "call";
    /// Notification closing a calls stream ([`super::CallEndNotification`]).
    pub const CALL_END: &str = "call_end";

    /// Every request method, in the order `docs/protocol.md` lists them.
    pub const ALL: [&str; 25] = [
        LIST,
        STATUS,
        START,
        STOP,
        RESTART,
        RELOAD,
        LOGS,
        LOGS_CANCEL,
        EVENTS,
        EVENTS_CANCEL,
        DAEMON_STATUS,
        SHUTDOWN,
        TOOLS,
        CALLS,
        CALLS_CANCEL,
        TOOLS_APPROVE,
        TOOLS_DENY,
        SANDBOX_TEST,
        AUTH_LOGIN,
        AUTH_LOGIN_WAIT,
        AUTH_STATUS,
        AUTH_LOGOUT,
        CONSOLE_CODE,
        TOOLS_SEARCH,
        CLIENTS,
    ];
}

/// Lifecycle state of one supervised server (seed "Server states").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Not running and not wanted running.
    Stopped,
    /// Spawn in progress.
    Starting,
    /// Child process alive.
    Running,
    /// Child exited; a restart is scheduled after backoff.
    Restarting,
    /// Gave up: dirty exit not restarted, retry cap hit, or spawn failure.
    Failed,
    /// SIGTERM sent, grace period running.
    Stopping,
    /// An on-demand stdio server: xy listens on its port, no child runs
    /// until the first request (SPEC §13).
    Idle,
}

impl ServerState {
    /// The wire spelling (`"running"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            ServerState::Stopped => "stopped",
            ServerState::Starting => "starting",
            ServerState::Running => "running",
            ServerState::Restarting => "restarting",
            ServerState::Failed => "failed",
            ServerState::Stopping => "stopping",
            ServerState::Idle => "idle",
        }
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the last child run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastExit {
    /// Exit code, when the process exited normally.
    pub code: Option<i32>,
    /// Signal name (`"SIGKILL"`), when a signal ended it.
    pub signal: Option<String>,
    /// When it ended (RFC 3339 UTC).
    pub ts: String,
}

/// One row of `list` (and the head of `status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListEntry {
    /// Server name (the config file stem).
    pub name: String,
    /// Current lifecycle state.
    pub state: ServerState,
    /// Leader pid of the running child, else `null`.
    pub pid: Option<u32>,
    /// The configured port.
    pub port: u16,
    /// `http` (the child serves HTTP) or `stdio` (xy serves it over HTTP).
    #[serde(default)]
    pub transport: Transport,
    /// The MCP endpoint: `http://127.0.0.1:<port><path>`.
    #[serde(default)]
    pub url: String,
    /// Seconds since the current child was spawned, else `null`.
    pub uptime_secs: Option<u64>,
    /// Restarts performed by policy (not counting the first spawn).
    pub restart_count: u32,
    /// How the previous child ended, if one did.
    pub last_exit: Option<LastExit>,
    /// The health probe's verdict (`unknown` when no probe is configured
    /// or the server is not running).
    #[serde(default)]
    pub health: Health,
    /// CPU use of the whole process group, in percent of one core, since
    /// the previous `list`/`status` (the first: since the child started);
    /// `null` when not running.
    #[serde(default)]
    pub cpu_percent: Option<f64>,
    /// Resident memory summed over the process group; `null` when not running.
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    /// Tools the server listed after its current spawn (SPEC §12); `null`
    /// without an `mcp` probe, before its first success, or if listing failed.
    #[serde(default)]
    pub tool_count: Option<u32>,
    /// Of the tools and prompts xy listed, how many its firewall holds back
    /// from clients (SPEC §20): pending, changed, flagged or denied.
    #[serde(default)]
    pub tools_held: u32,
    /// The config's `agent { allow-restart #true }` (SPEC §17): an agent
    /// may start and restart this server through `xyctl mcp`.
    #[serde(default)]
    pub agent_allow_restart: bool,
    /// A remote server's upstream (SPEC §23: its `url` as configured);
    /// `null` for a server xy runs.
    #[serde(default)]
    pub remote_url: Option<String>,
    /// The server through xy's gateway (SPEC §20):
    /// `http://127.0.0.1:<gateway port>/<name>/mcp`; `null` when the
    /// gateway is off.
    #[serde(default)]
    pub gateway_url: Option<String>,
}

/// What the health probe last concluded (SPEC §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    /// The last probe succeeded.
    Healthy,
    /// `failures` consecutive probes failed.
    Unhealthy,
    /// Running, but no verdict yet (inside `start-period`, or fewer than
    /// `failures` failures so far without a success).
    Starting,
    /// No probe configured, or the server is not running.
    #[default]
    Unknown,
}

impl HealthState {
    /// The wire spelling (`"healthy"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "healthy",
            HealthState::Unhealthy => "unhealthy",
            HealthState::Starting => "starting",
            HealthState::Unknown => "unknown",
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The health of one server as `list` and `status` report it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The verdict.
    pub state: HealthState,
    /// How long the last probe took, else `null`.
    pub latency_ms: Option<u64>,
    /// Why the last probe failed; `null` after a success or before any probe.
    pub error: Option<String>,
    /// When the last probe finished (RFC 3339 UTC), else `null`.
    pub checked_at: Option<String>,
}

/// `health { … }` settings as `status` reports them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthSettings {
    /// `mcp` | `http` | `tcp`.
    pub probe: String,
    /// The HTTP path probed (`mcp` and `http`), else `null`.
    pub path: Option<String>,
    /// Time between probes.
    pub interval_ms: u64,
    /// Bound on one probe.
    pub timeout_ms: u64,
    /// Consecutive failures that make the server `unhealthy`.
    pub failures: u32,
    /// Failures inside this window after a spawn do not count.
    pub start_period_ms: u64,
    /// Restart the child (through the restart policy) once `unhealthy`.
    pub restart_on_failure: bool,
}

/// One recorded state change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// State before.
    pub from: ServerState,
    /// State after.
    pub to: ServerState,
    /// When (RFC 3339 UTC).
    pub ts: String,
    /// Why, in a few words (`"exited with code 1"`, `"stop requested"`).
    pub reason: String,
}

/// `restart { … }` settings as reported by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartSettings {
    /// `always` | `on-failure` | `never`.
    pub policy: String,
    /// First backoff delay.
    pub backoff_initial_ms: u64,
    /// Backoff cap.
    pub backoff_max_ms: u64,
    /// Restarts allowed inside any 60 s window.
    pub max_retries_per_minute: u32,
}

/// `stop { … }` settings as reported by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopSettings {
    /// SIGTERM → SIGKILL window.
    pub grace_ms: u64,
}

/// Result of `status`: a list entry plus detail. Env values are never sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusResult {
    /// The `list` fields.
    #[serde(flatten)]
    pub entry: ListEntry,
    /// Last (up to 20) state transitions, oldest first.
    pub transitions: Vec<Transition>,
    /// The configured command, as written.
    pub command: String,
    /// The configured arguments.
    pub args: Vec<String>,
    /// The configured working directory, else `null` (the daemon's cwd).
    pub working_dir: Option<String>,
    /// Names of the `env` block's variables; values are withheld (secrets).
    pub env_keys: Vec<String>,
    /// Restart settings.
    pub restart: RestartSettings,
    /// Stop settings.
    pub stop: StopSettings,
    /// The config file this server came from.
    pub config_file: String,
    /// Why the server is `failed` or backing off, in one line: the
    /// classified cause, the last stderr line(s) and the next retry time;
    /// for a `running` server, why xy could not list its tools (SPEC §20),
    /// else `null`.
    #[serde(default)]
    pub explain: Option<String>,
    /// When the next restart is due (RFC 3339 UTC); `null` unless the
    /// server is `restarting`, so scripts need not parse `explain`.
    #[serde(default)]
    pub next_retry_at: Option<String>,
    /// The `health { … }` settings, `null` when no probe is configured.
    #[serde(default)]
    pub health_config: Option<HealthSettings>,
    /// Last (up to 20) health changes, oldest first; kept apart from
    /// `transitions` so a flapping probe never pushes lifecycle history out.
    #[serde(default)]
    pub health_history: Vec<HealthTransition>,
    /// What the `mcp` probe learned since the current spawn; `null` until
    /// it has succeeded (SPEC §12).
    #[serde(default)]
    pub mcp: Option<mcp::McpStatus>,
    /// `secrets { }`: each secret's name and source kind (SPEC §16).
    #[serde(default)]
    pub secrets: Vec<SecretInfo>,
    /// The effective `sandbox` rules (SPEC §21); `null`: unconfined.
    #[serde(default)]
    pub sandbox: Option<SandboxStatus>,
    /// The pinned install (SPEC §22); `null`: the server file names no
    /// `package`.
    #[serde(default)]
    pub package: Option<PackageStatus>,
    /// A remote server's upstream, header names and auth kind (SPEC §23);
    /// `null` for a server xy runs. Never a header's value.
    #[serde(default)]
    pub remote: Option<RemoteStatus>,
    /// Notifications from the server's child that xy dropped because a
    /// client's queue was full (SPEC §24 "Bounded children"); 0 for a
    /// server without a stdio bridge.
    #[serde(default)]
    pub dropped_notifications: u64,
}

/// One recorded change of [`HealthState`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthTransition {
    /// Verdict before.
    pub from: HealthState,
    /// Verdict after.
    pub to: HealthState,
    /// When (RFC 3339 UTC).
    pub ts: String,
    /// The probe's finding (`"ping answered in 3 ms"`, the error).
    pub reason: String,
}

/// Params of `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameParams {
    /// Server name.
    pub name: String,
}

/// Params of `start` / `stop` / `restart`: one name, several, or all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetParams {
    /// One server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Several servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// Every configured server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

impl TargetParams {
    /// Targets one server by name.
    pub fn one(name: impl Into<String>) -> Self {
        TargetParams {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Targets several servers by name.
    pub fn many(names: Vec<String>) -> Self {
        TargetParams {
            names: Some(names),
            ..Self::default()
        }
    }

    /// Targets every configured server.
    pub fn all() -> Self {
        TargetParams {
            all: true,
            ..Self::default()
        }
    }

    /// The explicit names asked for (empty when `all`), in request order,
    /// de-duplicated.
    pub fn requested_names(&self) -> Vec<String> {
        requested_names(self.name.as_ref(), self.names.as_deref())
    }

    /// Whether the params name nothing at all (an `-32602` for the caller).
    pub fn is_empty(&self) -> bool {
        !self.all && self.requested_names().is_empty()
    }
}

/// Result of `start`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartResult {
    /// Servers spawned by this call.
    pub started: Vec<String>,
    /// Servers that were already running (or starting).
    pub already_running: Vec<String>,
    /// Servers whose start a stop overtook before it could spawn (they are
    /// `stopped`). Absent when empty: the seed's table fixes `start`'s
    /// result as `{started, already_running}` (D184).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cancelled: Vec<String>,
}

/// Result of `stop`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopResult {
    /// Servers stopped by this call (their process groups are gone).
    pub stopped: Vec<String>,
    /// Servers that were not running.
    pub not_running: Vec<String>,
}

/// Result of `restart`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartResult {
    /// Servers stopped (if running) and started again.
    pub restarted: Vec<String>,
    /// Servers whose restart a stop overtook before the new child could
    /// spawn (they are `stopped`). Absent when empty: the seed's table fixes
    /// `restart`'s result as `{restarted}` (D184).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cancelled: Vec<String>,
}

/// Result of `reload`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadResult {
    /// New config files: started.
    pub added: Vec<String>,
    /// Config files gone: stopped and forgotten.
    pub removed: Vec<String>,
    /// Config changed: stopped and started with the new config.
    pub changed: Vec<String>,
    /// Left alone (same pid).
    pub unchanged: Vec<String>,
}

/// Result of `daemon_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// `xyd`'s crate version.
    pub version: String,
    /// [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The daemon's pid.
    pub pid: u32,
    /// Boot time (RFC 3339 UTC).
    pub started_at: String,
    /// Seconds since boot.
    pub uptime_secs: u64,
    /// Socket path.
    pub socket: String,
    /// Directory the server configs are read from.
    pub config_dir: String,
    /// Directory of the log files.
    pub log_dir: String,
    /// Number of configured servers.
    pub servers: usize,
    /// Only while booting (the orphan sweep): what the daemon is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootProgress>,
    /// The gateway (SPEC §20); absent when `xy.kdl` turns it off (`port 0`)
    /// and while booting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayStatus>,
}

/// `daemon_status.gateway`: where the gateway listens, and why it does not
/// when its port could not be bound (the bind is retried).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayStatus {
    /// `http://127.0.0.1:<port>/`; a server is at `<url><name>/mcp`.
    pub url: String,
    /// `null` while bound; else why the bind failed.
    pub error: Option<String>,
}

/// Result of `shutdown`: an empty object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownResult {}

/// `name` then `names`, in request order, without repeats: the one reading
/// of the `name`/`names` pair that `start`/`stop`/`restart`, `logs` and
/// `events` (names only) share.
fn requested_names(name: Option<&String>, names: Option<&[String]>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in name.into_iter().chain(names.into_iter().flatten()) {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;

pub mod mcp;
pub use mcp::app_only;
