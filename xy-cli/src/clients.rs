//! AI clients' MCP config files (SPEC §14): where each client keeps its file
//! on macOS and Linux, reading its server entries, and rewriting entries to
//! point at xy while every other byte stays as it was. Pure: text in, text
//! out; the file handling is in [`mod@file`], the printing in `commands::clients`.
//! Sources for every location and shape: `docs/clients.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

pub(crate) mod file;
mod json;
mod toml;

/// The clients xy knows, by their SPEC ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub(crate) enum ClientId {
    /// Claude Desktop: `claude_desktop_config.json`, stdio entries only.
    #[value(name = "claude-desktop")]
    ClaudeDesktop,
    /// Claude Code: the user-scope `mcpServers` of `~/.claude.json`.
    #[value(name = "claude-code")]
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`.
    Cursor,
    /// VS Code: the user profile's `mcp.json` (JSONC, `servers`).
    Vscode,
    /// Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    Windsurf,
    /// Codex: `~/.codex/config.toml`, `[mcp_servers.<name>]`.
    Codex,
}

/// Which OS's locations to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Os {
    /// macOS.
    Mac,
    /// Linux (and other Unixes).
    Linux,
}

impl Os {
    /// This machine's.
    pub(crate) fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::Mac
        } else {
            Os::Linux
        }
    }
}

/// The environment a location depends on.
#[derive(Debug, Clone)]
pub(crate) struct Home {
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// `$XDG_CONFIG_HOME` when absolute.
    pub(crate) xdg_config: Option<PathBuf>,
    /// `$CODEX_HOME` when set.
    pub(crate) codex_home: Option<PathBuf>,
}

impl Home {
    /// From the process environment; `None` without `$HOME`.
    pub(crate) fn from_env() -> Option<Home> {
        let abs = |k: &str| {
            std::env::var_os(k)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Some(Home {
            home: abs("HOME")?,
            xdg_config: abs("XDG_CONFIG_HOME"),
            codex_home: abs("CODEX_HOME"),
        })
    }

    fn config(&self) -> PathBuf {
        self.xdg_config
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
    }
}

/// How a client's file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// JSON with `mcpServers`.
    Json,
    /// VS Code's JSON with comments, `servers`.
    Jsonc,
    /// Codex's TOML, `[mcp_servers.<name>]`.
    Toml,
}

impl ClientId {
    /// Every client, in SPEC order.
    pub(crate) const ALL: [ClientId; 6] = [
        ClientId::ClaudeDesktop,
        ClientId::ClaudeCode,
        ClientId::Cursor,
        ClientId::Vscode,
        ClientId::Windsurf,
        ClientId::Codex,
    ];

    /// The SPEC id.
    pub(crate) fn id(self) -> &'static str {
        match self {
            ClientId::ClaudeDesktop => "claude-desktop",
            ClientId::ClaudeCode => "claude-code",
            ClientId::Cursor => "cursor",
            ClientId::Vscode => "vscode",
            ClientId::Windsurf => "windsurf",
            ClientId::Codex => "codex",
        }
    }

    /// The file format.
    pub(crate) fn format(self) -> Format {
        match self {
            ClientId::Vscode => Format::Jsonc,
            ClientId::Codex => Format::Toml,
            _ => Format::Json,
        }
    }

    /// The key that holds the server entries.
    fn servers_key(self) -> &'static str {
        match self {
            ClientId::Vscode => "servers",
            ClientId::Codex => "mcp_servers",
            _ => "mcpServers",
        }
    }

    /// Claude Desktop launches stdio servers only (remote servers are added
    /// as connectors in its UI, not in the file).
    pub(crate) fn stdio_only(self) -> bool {
        self == ClientId::ClaudeDesktop
    }

    /// The user-level config file on `os`.
    pub(crate) fn default_path(self, os: Os, h: &Home) -> PathBuf {
        let app_support = || h.home.join("Library/Application Support");
        match (self, os) {
            (ClientId::ClaudeDesktop, Os::Mac) => {
                app_support().join("Claude/claude_desktop_config.json")
            }
            (ClientId::ClaudeDesktop, Os::Linux) => {
                h.config().join("Claude/claude_desktop_config.json")
            }
            (ClientId::ClaudeCode, _) => h.home.join(".claude.json"),
            (ClientId::Cursor, _) => h.home.join(".cursor/mcp.json"),
            (ClientId::Vscode, Os::Mac) => app_support().join("Code/User/mcp.json"),
            (ClientId::Vscode, Os::Linux) => h.config().join("Code/User/mcp.json"),
            (ClientId::Windsurf, _) => h.home.join(".codeium/windsurf/mcp_config.json"),
            (ClientId::Codex, _) => h
                .codex_home
                .clone()
                .unwrap_or_else(|| h.home.join(".codex"))
                .join("config.toml"),
        }
    }

    /// The entry that points this client at `to`.
    fn pointer_fields(self, to: &Pointer) -> Vec<(&'static str, Value)> {
        match to {
            Pointer::Connect { xyctl, server } => vec![
                ("command", Value::Str(xyctl.clone())),
                (
                    "args",
                    Value::List(vec!["connect".to_owned(), server.clone()]),
                ),
            ],
            Pointer::Remove => Vec::new(),
            Pointer::ConnectOne { xyctl, profile } => {
                let mut args = vec!["connect".to_owned(), "--one".to_owned()];
                if let Some(p) = profile {
                    args.extend(["--profile".to_owned(), p.clone()]);
                }
                let mut fields = vec![
                    ("command", Value::Str(xyctl.clone())),
                    ("args", Value::List(args)),
                ];
                if matches!(self, ClientId::ClaudeCode | ClientId::Vscode) {
                    fields.insert(0, ("type", Value::Str("stdio".to_owned())));
                }
                fields
            }
            Pointer::XyMcp { xyctl } => {
                let mut fields = vec![
                    ("command", Value::Str(xyctl.clone())),
                    ("args", Value::List(vec!["mcp".to_owned()])),
                ];
                // These two spell out the transport of every entry.
                if matches!(self, ClientId::ClaudeCode | ClientId::Vscode) {
                    fields.insert(0, ("type", Value::Str("stdio".to_owned())));
                }
                fields
            }
            Pointer::Url(url) => match self {
                ClientId::ClaudeCode | ClientId::Vscode => vec![
                    ("type", Value::Str("http".to_owned())),
                    ("url", Value::Str(url.clone())),
                ],
                ClientId::Windsurf => vec![("serverUrl", Value::Str(url.clone()))],
                _ => vec![("url", Value::Str(url.clone()))],
            },
        }
    }
}

/// Keys of an entry that say how to reach the server: replaced as a whole
/// when the entry is pointed at xy. Every other key (`disabled`,
/// `autoApprove`, `enabled_tools`, …) stays.
const TRANSPORT_KEYS: [&str; 12] = [
    "type",
    "transport",
    "command",
    "args",
    "env",
    "envFile",
    "env_vars",
    "cwd",
    "url",
    "serverUrl",
    "headers",
    "http_headers",
];

/// A value written into an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Str(String),
    List(Vec<String>),
}

/// What one of a client's entries does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Spec {
    /// Spawns a process.
    Stdio {
        /// `command`.
        command: String,
        /// `args`.
        args: Vec<String>,
        /// `env`.
        env: BTreeMap<String, String>,
        /// `cwd`, when given.
        cwd: Option<String>,
    },
    /// Talks to a URL.
    Url(String),
    /// Neither (an entry this reader does not understand).
    Other,
}

/// One server entry of a client's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The entry's key.
    pub(crate) name: String,
    /// What it does.
    pub(crate) spec: Spec,
    /// A URL entry's `headers` (Claude Code, Cursor, VS Code), in order.
    pub(crate) headers: Vec<(String, String)>,
}

/// What a client entry makes of a remote server (SPEC §23): a URL entry,
/// or an `npx [-y] mcp-remote <url> [--header 'Name: value']…` entry (its
/// `${VAR}`s taken from the entry's `env`). `None`: neither.
pub(crate) fn remote_of(e: &Entry) -> Option<(String, Vec<(String, String)>)> {
    match &e.spec {
        Spec::Url(url) => Some((url.clone(), e.headers.clone())),
        Spec::Stdio {
            command, args, env, ..
        } => {
            let program = command.rsplit('/').next().unwrap_or(command);
            if program != "npx" {
                return None;
            }
            let mut rest = args.iter().skip_while(|a| a.starts_with('-'));
            let pkg = rest.next()?;
            if pkg != "mcp-remote" && !pkg.starts_with("mcp-remote@") {
                return None;
            }
            let url = rest.next()?.clone();
            let mut headers = Vec::new();
            while let Some(a) = rest.next() {
                if a == "--header"
                    && let Some(h) = rest.next()
                    && let Some((name, value)) = h.split_once(':')
                {
                    headers.push((name.trim().to_owned(), substitute(value.trim(), env)));
                }
            }
            Some((url, headers))
        }
        Spec::Other => None,
    }
}

/// `${VAR}` replaced from `env` (as `mcp-remote` does for its headers).
fn substitute(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        match rest[at + 2..].find('}') {
            Some(end) => {
                let var = &rest[at + 2..at + 2 + end];
                out.push_str(env.get(var).map_or("", String::as_str));
                rest = &rest[at + 3 + end..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where a rewritten entry points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pointer {
    /// xy's URL for the server.
    Url(String),
    /// `<xyctl> connect <server>` (clients that only launch stdio servers).
    Connect {
        /// `xyctl`'s absolute path.
        xyctl: String,
        /// The xy server.
        server: String,
    },
    /// `<xyctl> mcp`: xy itself as an MCP server (SPEC §17, `--with-xy`).
    XyMcp {
        /// `xyctl`'s absolute path.
        xyctl: String,
    },
    /// `<xyctl> connect --one [--profile P]`: the aggregate, for clients
    /// that only launch stdio servers (SPEC §26).
    ConnectOne {
        /// `xyctl`'s absolute path.
        xyctl: String,
        /// The profile, if any.
        profile: Option<String>,
    },
    /// No entry: `clients apply --one` removes the entries the aggregate
    /// stands for.
    Remove,
}

impl Pointer {
    /// Whether `spec` already is this pointer.
    pub(crate) fn matches(&self, spec: &Spec) -> bool {
        match (self, spec) {
            (Pointer::Url(u), Spec::Url(v)) => u == v,
            (Pointer::Connect { xyctl, server }, Spec::Stdio { command, args, .. }) => {
                command == xyctl && args.len() == 2 && args[0] == "connect" && &args[1] == server
            }
            (
                Pointer::XyMcp { xyctl },
                Spec::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                },
            ) => {
                command == xyctl
                    && args.len() == 1
                    && args[0] == "mcp"
                    && env.is_empty()
                    && cwd.is_none()
            }
            (Pointer::ConnectOne { xyctl, profile }, Spec::Stdio { command, args, .. }) => {
                let mut want = vec!["connect".to_owned(), "--one".to_owned()];
                if let Some(p) = profile {
                    want.extend(["--profile".to_owned(), p.clone()]);
                }
                command == xyctl && *args == want
            }
            _ => false,
        }
    }
}

/// One change `apply` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rewrite {
    /// The client's entry name.
    pub(crate) entry: String,
    /// Where it will point.
    pub(crate) to: Pointer,
}

/// Why a client's file could not be read or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClientError {
    /// Not valid JSON / JSONC / TOML.
    #[error("{0}")]
    Parse(String),
    /// Valid, but not shaped like the client's config.
    #[error("{0}")]
    Shape(String),
}

/// The server entries of a client's file (none for an empty file).
pub(crate) fn entries(client: ClientId, text: &str) -> Result<Vec<Entry>, ClientError> {
    match client.format() {
        Format::Json | Format::Jsonc => json::entries(text, client.servers_key()),
        Format::Toml => toml::entries(text),
    }
}

/// `text` with each rewrite applied; nothing else changes.
pub(crate) fn apply(
    client: ClientId,
    text: &str,
    rewrites: &[Rewrite],
) -> Result<String, ClientError> {
    let changes: Vec<(String, Vec<(&'static str, Value)>)> = rewrites
        .iter()
        .map(|r| (r.entry.clone(), client.pointer_fields(&r.to)))
        .collect();
    match client.format() {
        Format::Json | Format::Jsonc => json::apply(text, client.servers_key(), &changes),
        Format::Toml => toml::apply(text, &changes),
    }
}

/// Reads a spec from the generic fields shared by every format.
fn spec_of(
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
) -> Spec {
    match (command, url) {
        (Some(command), _) => Spec::Stdio {
            command,
            args,
            env,
            cwd,
        },
        (None, Some(url)) => Spec::Url(url),
        (None, None) => Spec::Other,
    }
}

/// A unified diff of a planned change, for `--dry-run`.
pub(crate) fn diff(path: &Path, old: &str, new: &str) -> String {
    let shown = path.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&shown, &shown)
        .to_string()
}

#[cfg(test)]
mod tests;
