//! AI clients' MCP config files, read (SPEC §14, §28): where each client
//! keeps its file on macOS and Linux, its server entries, and what each
//! entry uses — xy's gateway for a server, `/mcp`, `xyctl connect`,
//! `xyctl mcp`, or a process or URL of its own. Pure: text in, entries out.
//! `xyctl clients` and the console's Clients page read through this one
//! copy; rewriting the files is `xy-cli`'s. Sources for every location and
//! shape: `docs/clients.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::protocol::{ClientEntry as FoundEntry, ClientFile as Found, ListEntry};

pub mod json;
pub mod toml;

/// The clients xy knows, by their SPEC ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientId {
    /// Claude Desktop: `claude_desktop_config.json`, stdio entries only.
    ClaudeDesktop,
    /// Claude Code: the user-scope `mcpServers` of `~/.claude.json`.
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
pub enum Os {
    /// macOS.
    Mac,
    /// Linux (and other Unixes).
    Linux,
}

impl Os {
    /// This machine's.
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::Mac
        } else {
            Os::Linux
        }
    }
}

/// The environment a location depends on.
#[derive(Debug, Clone)]
pub struct Home {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` when absolute.
    pub xdg_config: Option<PathBuf>,
    /// `$CODEX_HOME` when set.
    pub codex_home: Option<PathBuf>,
}

impl Home {
    /// From the process environment; `None` without `$HOME`.
    pub fn from_env() -> Option<Home> {
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
pub enum Format {
    /// JSON with `mcpServers`.
    Json,
    /// VS Code's JSON with comments, `servers`.
    Jsonc,
    /// Codex's TOML, `[mcp_servers.<name>]`.
    Toml,
}

impl ClientId {
    /// Every client, in SPEC order.
    pub const ALL: [ClientId; 6] = [
        ClientId::ClaudeDesktop,
        ClientId::ClaudeCode,
        ClientId::Cursor,
        ClientId::Vscode,
        ClientId::Windsurf,
        ClientId::Codex,
    ];

    /// The client of a SPEC id.
    pub fn from_id(id: &str) -> Option<ClientId> {
        ClientId::ALL.into_iter().find(|c| c.id() == id)
    }

    /// The SPEC id.
    pub fn id(self) -> &'static str {
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
    pub fn format(self) -> Format {
        match self {
            ClientId::Vscode => Format::Jsonc,
            ClientId::Codex => Format::Toml,
            _ => Format::Json,
        }
    }

    /// The key that holds the server entries.
    pub fn servers_key(self) -> &'static str {
        match self {
            ClientId::Vscode => "servers",
            ClientId::Codex => "mcp_servers",
            _ => "mcpServers",
        }
    }

    /// Claude Desktop launches stdio servers only (remote servers are added
    /// as connectors in its UI, not in the file).
    pub fn stdio_only(self) -> bool {
        self == ClientId::ClaudeDesktop
    }

    /// The user-level config file on `os`.
    pub fn default_path(self, os: Os, h: &Home) -> PathBuf {
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
}

/// What one of a client's entries does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
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
pub struct Entry {
    /// The entry's key.
    pub name: String,
    /// What it does.
    pub spec: Spec,
    /// A URL entry's `headers` (Claude Code, Cursor, VS Code), in order.
    pub headers: Vec<(String, String)>,
}

/// What a client entry makes of a remote server (SPEC §23): a URL entry,
/// or an `npx [-y] mcp-remote <url> [--header 'Name: value']…` entry (its
/// `${VAR}`s taken from the entry's `env`). `None`: neither.
pub fn remote_of(e: &Entry) -> Option<(String, Vec<(String, String)>)> {
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

/// Why a client's file could not be read or edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// Not valid JSON / JSONC / TOML.
    #[error("{0}")]
    Parse(String),
    /// Valid, but not shaped like the client's config.
    #[error("{0}")]
    Shape(String),
}

/// The server entries of a client's file (none for an empty file).
pub fn entries(client: ClientId, text: &str) -> Result<Vec<Entry>, ClientError> {
    match client.format() {
        Format::Json | Format::Jsonc => json::entries(text, client.servers_key()),
        Format::Toml => toml::entries(text),
    }
}

/// Reads a spec from the generic fields shared by every format.
pub(crate) fn spec_of(
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

/// An xy server's URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XyUrl {
    /// What `clients apply` writes: the gateway's URL (SPEC §20), or the
    /// server's own port when the gateway is off.
    pub url: String,
    /// The server's own port's URL, which an entry written before the
    /// gateway (or while it was off) holds: still xy's.
    pub own: String,
}

/// A server's own URL as `list` gives it (its port's `/mcp` when the
/// entry has none).
pub fn own_url(entry: &ListEntry) -> String {
    if entry.url.is_empty() {
        port_url(entry.port)
    } else {
        entry.url.clone()
    }
}

/// A server's URL on its own port.
pub fn port_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// The servers xy runs (`list`): name → URLs.
pub fn xy_urls(list: &[ListEntry]) -> BTreeMap<String, XyUrl> {
    list.iter()
        .map(|e| {
            let own = own_url(e);
            let url = e.gateway_url.clone().unwrap_or_else(|| own.clone());
            (e.name.clone(), XyUrl { url, own })
        })
        .collect()
}

/// A server name from anything: runs of other characters become `-`.
pub fn usable_name(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() || "_.-".contains(c) {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches(|c| c == '-' || c == '.');
    if trimmed.is_empty() {
        "server".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The xy server a client entry stands for: the same name, or the name
/// `import` would have given it.
pub fn xy_name_for<'a>(
    entry: &str,
    xy: &'a BTreeMap<String, XyUrl>,
) -> Option<(&'a String, &'a XyUrl)> {
    xy.get_key_value(entry)
        .or_else(|| xy.get_key_value(&usable_name(entry)))
}

fn is_xyctl(command: &str) -> bool {
    Path::new(command).file_name().is_some_and(|f| f == "xyctl")
}

/// Whether an entry runs `xyctl mcp` (any xyctl).
pub fn is_xy_mcp(spec: &Spec) -> bool {
    match spec {
        Spec::Stdio { command, args, .. } => {
            is_xyctl(command) && matches!(args.as_slice(), [a] if a == "mcp")
        }
        _ => false,
    }
}

/// Which xy server an entry already points at, if any.
pub fn points_at_xy(spec: &Spec, xy: &BTreeMap<String, XyUrl>) -> Option<String> {
    match spec {
        Spec::Url(u) => xy
            .iter()
            .find(|(_, x)| x.url == *u || x.own == *u)
            .map(|(n, _)| n.clone()),
        Spec::Stdio { command, args, .. } => match args.as_slice() {
            [c, name] if is_xyctl(command) && c == "connect" && !name.starts_with('-') => {
                Some(name.clone())
            }
            _ => None,
        },
        Spec::Other => None,
    }
}

/// Whether an entry uses the aggregate (SPEC §26): the gateway's `/mcp` or
/// `/p/<profile>/mcp`, or `xyctl connect --one [--profile P]`; the
/// endpoint's path.
pub fn points_at_aggregate(spec: &Spec, gateway: Option<&str>) -> Option<String> {
    match spec {
        Spec::Url(u) => {
            let rest = u.strip_prefix(gateway?.trim_end_matches('/'))?;
            let profile = rest
                .strip_prefix("/p/")
                .and_then(|p| p.strip_suffix("/mcp"));
            (rest == "/mcp" || profile.is_some_and(|p| !p.is_empty() && !p.contains('/')))
                .then(|| rest.to_owned())
        }
        Spec::Stdio { command, args, .. } if is_xyctl(command) => match args.as_slice() {
            [c, one] if c == "connect" && one == "--one" => Some("/mcp".to_owned()),
            [c, one, p, name] if c == "connect" && one == "--one" && p == "--profile" => {
                Some(format!("/p/{name}/mcp"))
            }
            _ => None,
        },
        _ => None,
    }
}

/// What each entry of a client's file uses.
pub fn classify(
    entries: Vec<Entry>,
    xy: &BTreeMap<String, XyUrl>,
    gateway: Option<&str>,
) -> Vec<FoundEntry> {
    entries
        .into_iter()
        .map(|e| {
            let mut endpoint = None;
            let (uses, xy_server) = if let Some(path) = points_at_aggregate(&e.spec, gateway) {
                endpoint = Some(path);
                ("aggregate", None)
            } else if let Some(s) = points_at_xy(&e.spec, xy) {
                ("xy", Some(s))
            } else if is_xy_mcp(&e.spec) {
                ("xy", None)
            } else {
                let stand = xy_name_for(&e.name, xy).map(|(n, _)| n.clone());
                match e.spec {
                    Spec::Stdio { .. } => ("process", stand),
                    Spec::Url(_) => ("url", stand),
                    Spec::Other => ("other", stand),
                }
            };
            FoundEntry {
                name: e.name,
                uses: uses.to_owned(),
                xy_server,
                endpoint,
            }
        })
        .collect()
}

/// Every client's file that exists on this machine, read and classified
/// against xy's servers and its gateway's base URL (`daemon_status`).
pub fn find(
    home: &Home,
    os: Os,
    xy: &BTreeMap<String, XyUrl>,
    gateway: Option<&str>,
) -> Vec<Found> {
    let mut found = Vec::new();
    for client in ClientId::ALL {
        let path = client.default_path(os, home);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let (error, entries) = match entries(client, &text) {
            Err(e) => (Some(e.to_string()), Vec::new()),
            Ok(es) => (None, classify(es, xy, gateway)),
        };
        found.push(Found {
            client: client.id().to_owned(),
            file: path.display().to_string(),
            error,
            entries,
        });
    }
    found
}
