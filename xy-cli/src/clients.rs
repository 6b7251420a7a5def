//! AI clients' MCP config files (SPEC §14): rewriting entries to point at
//! xy while every other byte stays as it was. Reading them (locations,
//! entries, what each uses) is [`xy_core::clients`]'s, shared with the
//! console. Pure: text in, text out; the file handling is in [`mod@file`],
//! the printing in `commands::clients`.

use std::path::Path;

pub(crate) use xy_core::clients::{
    ClientError, ClientId, Entry, Format, Home, Os, Spec, entries, remote_of,
};

pub(crate) mod file;
mod json;
mod toml;

/// The entry that points a client at `to`.
fn pointer_fields(client: ClientId, to: &Pointer) -> Vec<(&'static str, Value)> {
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
            if matches!(client, ClientId::ClaudeCode | ClientId::Vscode) {
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
            if matches!(client, ClientId::ClaudeCode | ClientId::Vscode) {
                fields.insert(0, ("type", Value::Str("stdio".to_owned())));
            }
            fields
        }
        Pointer::Url(url) => match client {
            ClientId::ClaudeCode | ClientId::Vscode => vec![
                ("type", Value::Str("http".to_owned())),
                ("url", Value::Str(url.clone())),
            ],
            ClientId::Windsurf => vec![("serverUrl", Value::Str(url.clone()))],
            _ => vec![("url", Value::Str(url.clone()))],
        },
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

/// `text` with each rewrite applied; nothing else changes.
pub(crate) fn apply(
    client: ClientId,
    text: &str,
    rewrites: &[Rewrite],
) -> Result<String, ClientError> {
    let changes: Vec<(String, Vec<(&'static str, Value)>)> = rewrites
        .iter()
        .map(|r| (r.entry.clone(), pointer_fields(client, &r.to)))
        .collect();
    match client.format() {
        Format::Json | Format::Jsonc => json::apply(text, client.servers_key(), &changes),
        Format::Toml => toml::apply(text, &changes),
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
