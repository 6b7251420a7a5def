//! The SPEC §16 settings of a server: where its secrets come from (never the
//! values: those are looked up at each spawn by `xy-actors`), and the hook
//! commands run when it fails, turns unhealthy, restarts or recovers.

use std::path::PathBuf;

/// One `secrets { NAME … }` entry: the env variable the child gets, and
/// where its value is looked up at each spawn.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretSpec {
    /// The environment variable name (also the `[redacted:NAME]` label).
    pub name: String,
    /// Where the value comes from.
    pub source: SecretSource,
}

/// Where a secret's value is looked up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretSource {
    /// `command="op" "read" "op://…"`: the program's stdout, one trailing
    /// newline removed. Run without a shell.
    Command {
        /// The program (a path or a name on the daemon's PATH).
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// `keychain="service" account="me"`: macOS `security
    /// find-generic-password -s service [-a account] -w`.
    Keychain {
        /// The item's service.
        service: String,
        /// The item's account, if given.
        account: Option<String>,
    },
    /// `file="~/.secret"`: the file's content, one trailing newline removed
    /// (`~` is the home directory; a relative path is against the config
    /// directory).
    File(PathBuf),
}

impl SecretSource {
    /// The wire and KDL name of the source kind: `command`, `keychain`,
    /// `file`.
    pub const fn kind(&self) -> &'static str {
        match self {
            SecretSource::Command { .. } => "command",
            SecretSource::Keychain { .. } => "keychain",
            SecretSource::File(_) => "file",
        }
    }

    /// Where it comes from, for error messages (never the value): the
    /// program, the keychain item or the file.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::Command { program, .. } => format!("command `{program}`"),
            SecretSource::Keychain { service, account } => match account {
                Some(a) => format!("keychain item service={service:?} account={a:?}"),
                None => format!("keychain item service={service:?}"),
            },
            SecretSource::File(p) => format!("file {}", p.display()),
        }
    }
}

/// The events a hook can be attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    /// The server entered `failed`.
    Failed,
    /// The health probe turned `unhealthy`.
    Unhealthy,
    /// The server is restarted by its policy (entered `restarting`).
    Restart,
    /// Back to normal: `healthy` after `unhealthy`, or `running` again
    /// after `failed`.
    Recovered,
    /// The firewall held a tool or prompt back (SPEC §20): a desktop
    /// notification with `notify #true`; no `hooks { }` node (not in
    /// [`HookEvent::ALL`]).
    ToolsHeld,
}

impl HookEvent {
    /// Every event, in KDL order.
    pub const ALL: [HookEvent; 4] = [
        HookEvent::Failed,
        HookEvent::Unhealthy,
        HookEvent::Restart,
        HookEvent::Recovered,
    ];

    /// The `XY_EVENT` value: `failed`, `unhealthy`, `restart`, `recovered`.
    pub const fn as_str(self) -> &'static str {
        match self {
            HookEvent::Failed => "failed",
            HookEvent::Unhealthy => "unhealthy",
            HookEvent::Restart => "restart",
            HookEvent::Recovered => "recovered",
            HookEvent::ToolsHeld => "tools-held",
        }
    }

    /// The KDL node inside `hooks { }`: `on-failed`, ….
    pub const fn node(self) -> &'static str {
        match self {
            HookEvent::Failed => "on-failed",
            HookEvent::Unhealthy => "on-unhealthy",
            HookEvent::Restart => "on-restart",
            HookEvent::Recovered => "on-recovered",
            HookEvent::ToolsHeld => "on-tools-held",
        }
    }
}

/// `hooks { … }` and `notify`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct HooksConfig {
    /// Per event, the program and its arguments (run without a shell).
    pub commands: Vec<(HookEvent, Vec<String>)>,
    /// `notify #true`: a desktop notification on `failed` and `unhealthy`.
    pub notify: bool,
}

impl HooksConfig {
    /// The command line for `event`, if one is configured.
    pub fn command(&self, event: HookEvent) -> Option<&[String]> {
        self.commands
            .iter()
            .find(|(e, _)| *e == event)
            .map(|(_, c)| c.as_slice())
    }

    /// True when nothing would ever run.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && !self.notify
    }
}
