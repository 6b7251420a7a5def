//! The KDL configs (SPEC §3): one server per file and the daemon's own
//! `xy.kdl`. This file holds the typed [`ServerConfig`] and its blocks, and
//! re-exports the rest of the module:
//!
//! - `parse.rs` and `parse/`: the walk of a file into those types, with a
//!   diagnostic per mistake;
//! - `load.rs`: reading a whole directory and `xy.kdl` from disk, every
//!   error of every file collected at once;
//! - `diagnostic.rs`: the diagnostics (file, line, column, caret,
//!   did-you-mean) that `xyctl config check`, `xyd` boot and `reload` all
//!   show, and their wire form;
//! - `settings.rs` (`xy.kdl`), `secrets.rs` (SPEC §16), `remote.rs`
//!   (SPEC §23): the types of those parts; `dotenv.rs`: the `env-file`
//!   syntax.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::protocol::{HealthSettings, RestartSettings, StopSettings, Transport};

mod diagnostic;
mod dotenv;
mod load;
mod parse;
mod remote;
mod secrets;
mod settings;

pub use diagnostic::{ConfigDiagnostic, ConfigErrors, ConfigWarning};
pub use load::{
    CommandLookupError, load, load_dir, load_settings, resolve_command, resolve_command_in,
};
pub use parse::settings::parse_settings;
pub use parse::{is_valid_name, parse_server};
pub use remote::{HeaderSpec, HeaderValueSpec, OAuthConfig, RemoteConfig};
pub use secrets::{HookEvent, HooksConfig, SecretSource, SecretSpec};
pub use settings::{
    AggregateMode, AggregateSettings, ConsoleSettings, DEFAULT_CONSOLE_PORT, DEFAULT_GATEWAY_PORT,
    DaemonSettings, GatewaySettings, Profile, gateway_url,
};

/// Default `restart.backoff-initial`.
pub const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Default `restart.backoff-max`.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Default `restart.max-retries-per-minute`.
pub const DEFAULT_MAX_RETRIES_PER_MINUTE: u32 = 5;
/// Default `stop.grace`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// When a child that exited is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RestartPolicy {
    /// After any exit.
    Always,
    /// After a non-zero exit or a death by signal.
    #[default]
    OnFailure,
    /// Never.
    Never,
}

impl RestartPolicy {
    /// The KDL and wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "always",
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Never => "never",
        }
    }

    /// Parses the KDL spelling.
    pub fn from_name(s: &str) -> Option<RestartPolicy> {
        match s {
            "always" => Some(RestartPolicy::Always),
            "on-failure" => Some(RestartPolicy::OnFailure),
            "never" => Some(RestartPolicy::Never),
            _ => None,
        }
    }
}

/// `restart { … }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RestartConfig {
    /// `policy`.
    pub policy: RestartPolicy,
    /// `backoff-initial`.
    pub backoff_initial: Duration,
    /// `backoff-max`.
    pub backoff_max: Duration,
    /// `max-retries-per-minute`.
    pub max_retries_per_minute: u32,
}

impl Default for RestartConfig {
    fn default() -> Self {
        RestartConfig {
            policy: RestartPolicy::default(),
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
            max_retries_per_minute: DEFAULT_MAX_RETRIES_PER_MINUTE,
        }
    }
}

/// `stop { … }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StopConfig {
    /// `grace`: SIGTERM → SIGKILL window.
    pub grace: Duration,
}

impl Default for StopConfig {
    fn default() -> Self {
        StopConfig {
            grace: DEFAULT_GRACE,
        }
    }
}

/// `agent { … }`: what an AI agent may do to this server through
/// `xyctl mcp` (SPEC §17). Everything is off by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AgentConfig {
    /// `allow-restart`: the agent may start and restart this server.
    pub allow_restart: bool,
}

/// Default `on-demand.idle-stop`.
pub const DEFAULT_IDLE_STOP: Duration = Duration::from_secs(600);

/// `on-demand { … }` (stdio servers only): xy listens from boot, spawns the
/// child on the first request and stops it after `idle-stop` without use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OnDemandConfig {
    /// `idle-stop`: no request and no open stream for this long stops the child.
    pub idle_stop: Duration,
}

impl Default for OnDemandConfig {
    fn default() -> Self {
        OnDemandConfig {
            idle_stop: DEFAULT_IDLE_STOP,
        }
    }
}

/// Default `health.interval`.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(10);
/// Default `health.timeout`.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Default `health.failures`.
pub const DEFAULT_HEALTH_FAILURES: u32 = 3;
/// Default `health.start-period`.
pub const DEFAULT_HEALTH_START_PERIOD: Duration = Duration::from_secs(30);

/// Which probe `health { … }` runs against `127.0.0.1:<port>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// A TCP connect.
    Tcp,
    /// `GET <path>`; any 2xx is healthy.
    Http(String),
    /// MCP `initialize` (once per session) then `ping` over streamable HTTP
    /// at `<path>`.
    Mcp(String),
}

impl ProbeKind {
    /// The KDL and wire name: `tcp`, `http`, `mcp`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            ProbeKind::Tcp => "tcp",
            ProbeKind::Http(_) => "http",
            ProbeKind::Mcp(_) => "mcp",
        }
    }

    /// The probed HTTP path, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            ProbeKind::Tcp => None,
            ProbeKind::Http(p) | ProbeKind::Mcp(p) => Some(p),
        }
    }
}

/// `health { … }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HealthConfig {
    /// `mcp "/mcp"` | `http "/path"` | `tcp`: exactly one.
    pub probe: ProbeKind,
    /// `interval`.
    pub interval: Duration,
    /// `timeout`.
    pub timeout: Duration,
    /// `failures`: consecutive failures that make the server unhealthy.
    pub failures: u32,
    /// `start-period`: failures inside it (after a spawn, before the first
    /// success) do not count.
    pub start_period: Duration,
    /// `restart-on-failure`.
    pub restart_on_failure: bool,
}

impl HealthConfig {
    /// A probe with the default timings.
    pub fn new(probe: ProbeKind) -> HealthConfig {
        HealthConfig {
            probe,
            interval: DEFAULT_HEALTH_INTERVAL,
            timeout: DEFAULT_HEALTH_TIMEOUT,
            failures: DEFAULT_HEALTH_FAILURES,
            start_period: DEFAULT_HEALTH_START_PERIOD,
            restart_on_failure: false,
        }
    }

    /// The settings as `status` reports them.
    pub fn settings(&self) -> HealthSettings {
        HealthSettings {
            probe: self.probe.as_str().to_owned(),
            path: self.probe.path().map(str::to_owned),
            interval_ms: crate::time::as_millis_u64(self.interval),
            timeout_ms: crate::time::as_millis_u64(self.timeout),
            failures: self.failures,
            start_period_ms: crate::time::as_millis_u64(self.start_period),
            restart_on_failure: self.restart_on_failure,
        }
    }
}

/// One server, fully defaulted and validated.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The file stem (`[A-Za-z0-9_.-]+`).
    pub name: String,
    /// The file it was read from.
    pub source: PathBuf,
    /// `command` as written: an absolute path or a bare program name;
    /// empty for a remote server (`url`, see [`remote`](ServerConfig::remote)).
    pub command: String,
    /// `args`.
    pub args: Vec<String>,
    /// `port`: the child's own port (`http`), or the port xy serves a stdio
    /// child on; checked for duplicates.
    pub port: u16,
    /// `transport`: `http` (default), `stdio`, or `remote` (implied by `url`).
    pub transport: Transport,
    /// `url`, `headers { … }`, `auth { … }` (SPEC §23): `Some` exactly for a
    /// `transport "remote"` server. Part of
    /// [`settings`](ServerConfig::settings): a change reconnects it.
    pub remote: Option<RemoteConfig>,
    /// `path`: the MCP endpoint path (default `/mcp`).
    pub path: String,
    /// `on-demand { … }`; only ever `Some` for a stdio server.
    pub on_demand: Option<OnDemandConfig>,
    /// The child's environment on top of the daemon's: every `env-file` in
    /// order, then the `env` block (later wins).
    pub env: BTreeMap<String, String>,
    /// `env-file` paths, resolved against the config directory, in order.
    pub env_files: Vec<PathBuf>,
    /// `secrets { … }`: looked up at every spawn, set last in the child's
    /// environment. Only where they come from is kept here.
    pub secrets: Vec<SecretSpec>,
    /// `hooks { … }` and `notify`.
    pub hooks: HooksConfig,
    /// `working-dir`; `None` means the daemon's cwd.
    pub working_dir: Option<PathBuf>,
    /// `restart { … }`.
    pub restart: RestartConfig,
    /// `stop { … }`.
    pub stop: StopConfig,
    /// `health { … }`; `None`: no probe runs.
    pub health: Option<HealthConfig>,
    /// `agent { … }` (SPEC §17).
    pub agent: AgentConfig,
    /// `firewall { mode … }` (SPEC §20); `None`: the daemon's default.
    /// Not part of [`settings`](ServerConfig::settings): a new mode is
    /// applied to the tools the running child listed, without a restart.
    pub firewall: Option<crate::firewall::FirewallMode>,
    /// `sandbox { … }` (SPEC §21); `None`: the child runs unconfined. Part
    /// of [`settings`](ServerConfig::settings): a changed block restarts it.
    pub sandbox: Option<crate::sandbox::SandboxConfig>,
    /// `package "npm:<pkg>@<ver>"` (SPEC §22): the pinned install `command`
    /// runs. Informational to the daemon (it never installs), but part of
    /// [`settings`](ServerConfig::settings): a changed package restarts it.
    pub package: Option<crate::package::PackageRef>,
    /// `autostart` (default `#true`): whether boot and reload start the
    /// server. `#false` (what `xyctl add --no-start` writes) leaves it
    /// `stopped` until `xyctl start`. Not part of
    /// [`settings`](ServerConfig::settings): it says nothing about how the
    /// child runs.
    pub autostart: bool,
}

/// Env values often hold secrets: `Debug` shows only the keys.
impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("port", &self.port)
            .field("transport", &self.transport)
            .field("remote", &self.remote)
            .field("path", &self.path)
            .field("on_demand", &self.on_demand)
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("env_files", &self.env_files)
            .field("secrets", &self.secrets)
            .field("hooks", &self.hooks)
            .field("working_dir", &self.working_dir)
            .field("restart", &self.restart)
            .field("stop", &self.stop)
            .field("health", &self.health)
            .field("agent", &self.agent)
            .field("firewall", &self.firewall)
            .field("sandbox", &self.sandbox)
            .field("package", &self.package)
            .finish()
    }
}

/// What a running server depends on: every setting of a [`ServerConfig`]
/// but its name and its file. `reload` restarts a server exactly when these
/// differ (`==`): they are the parsed and defaulted values, so comments,
/// whitespace, node order, the KDL version or a default written out change
/// nothing. Borrowed, compared, never stored.
#[derive(PartialEq, Eq)]
pub struct Settings<'a> {
    command: &'a str,
    args: &'a [String],
    port: u16,
    transport: Transport,
    remote: Option<&'a RemoteConfig>,
    path: &'a str,
    on_demand: Option<&'a OnDemandConfig>,
    env: &'a BTreeMap<String, String>,
    env_files: &'a [PathBuf],
    secrets: &'a [SecretSpec],
    hooks: &'a HooksConfig,
    working_dir: Option<&'a PathBuf>,
    restart: &'a RestartConfig,
    stop: &'a StopConfig,
    health: Option<&'a HealthConfig>,
    agent: &'a AgentConfig,
    sandbox: Option<&'a crate::sandbox::SandboxConfig>,
    package: Option<&'a crate::package::PackageRef>,
}

impl ServerConfig {
    /// The health probe xy runs: the `health { }` block, or, for a remote
    /// server without one, an `mcp` probe of its upstream with the default
    /// timings (xy learns that a remote is there only by asking it, D123).
    pub fn effective_health(&self) -> Option<HealthConfig> {
        match (&self.health, self.transport) {
            (Some(h), _) => Some(h.clone()),
            (None, Transport::Remote) => Some(HealthConfig::new(ProbeKind::Mcp(self.path.clone()))),
            (None, _) => None,
        }
    }

    /// Its [`Settings`].
    pub fn settings(&self) -> Settings<'_> {
        // Destructured, so a new field cannot be left out by accident.
        let ServerConfig {
            name: _,
            source: _,
            command,
            args,
            port,
            transport,
            remote,
            path,
            on_demand,
            env,
            env_files,
            secrets,
            hooks,
            working_dir,
            restart,
            stop,
            health,
            agent,
            // Applied to the running child's tools without a restart.
            firewall: _,
            sandbox,
            package,
            // Whether boot and reload start it, not how it runs.
            autostart: _,
        } = self;
        Settings {
            command,
            args,
            port: *port,
            transport: *transport,
            remote: remote.as_ref(),
            path,
            on_demand: on_demand.as_ref(),
            env,
            env_files,
            secrets,
            hooks,
            working_dir: working_dir.as_ref(),
            restart,
            stop,
            health: health.as_ref(),
            agent,
            sandbox: sandbox.as_ref(),
            package: package.as_ref(),
        }
    }

    /// The MCP endpoint, `http://127.0.0.1:<port><path>`.
    pub fn url(&self) -> String {
        crate::protocol::endpoint_url(self.port, &self.path)
    }

    /// `restart` settings as `status` reports them.
    pub fn restart_settings(&self) -> RestartSettings {
        RestartSettings {
            policy: self.restart.policy.as_str().to_owned(),
            backoff_initial_ms: crate::time::as_millis_u64(self.restart.backoff_initial),
            backoff_max_ms: crate::time::as_millis_u64(self.restart.backoff_max),
            max_retries_per_minute: self.restart.max_retries_per_minute,
        }
    }

    /// `stop` settings as `status` reports them.
    pub fn stop_settings(&self) -> StopSettings {
        StopSettings {
            grace_ms: crate::time::as_millis_u64(self.stop.grace),
        }
    }
}

/// A loaded config directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSet {
    /// The directory read.
    pub dir: PathBuf,
    /// Servers by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Non-fatal findings (command missing or not executable).
    pub warnings: Vec<ConfigWarning>,
    /// The daemon's settings (`xy.kdl`); the defaults when loaded by
    /// [`load_dir`] alone or when the file is absent.
    pub settings: DaemonSettings,
}

impl ConfigSet {
    /// The longest `stop.grace` (shutdown deadline is twice this).
    pub fn max_grace(&self) -> Duration {
        self.servers
            .values()
            .map(|s| s.stop.grace)
            .max()
            .unwrap_or_default()
    }
}
