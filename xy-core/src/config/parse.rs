//! The walk of a server file: the typed mapping from a KDL document (v2,
//! v1 fallback) to a [`ServerConfig`](super::ServerConfig), with a
//! diagnostic per mistake: the walk never stops at the first error, so one
//! `config check` shows them all. The top-level nodes, and which nested
//! node belongs in which block, are here; the rest is beside it:
//!
//! - `cx.rs`: the typed readers every block reads a node with, each
//!   reporting its own mistake;
//! - one file per block: `lifecycle.rs` (`restart`, `stop`, `on-demand`),
//!   `health.rs`, `secrets.rs` (SPEC §16), `agent.rs` (§17),
//!   `firewall.rs` (§20), `sandbox.rs` (§21), `package.rs` (§22),
//!   `remote.rs` (§23);
//! - `checks.rs`: the whole-file rules, run once the walk is done;
//! - `settings.rs`: the walk of the daemon's `xy.kdl`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kdl::{KdlDocument, KdlNode, KdlValue};
use miette::SourceSpan;

mod agent;
mod aggregate;
mod checks;
mod cx;
mod firewall;
mod health;
mod lifecycle;
mod package;
mod remote;
mod sandbox;
mod secrets;
pub(super) mod settings;

use super::diagnostic::ConfigDiagnostic;
use super::{ConfigErrors, HealthConfig, OnDemandConfig, RestartConfig, ServerConfig, StopConfig};
use crate::protocol::{DEFAULT_MCP_PATH, DiagnosticKind, Transport};
use cx::Cx;

/// Top-level nodes, in the order the docs list them.
const TOP_FIELDS: &[&str] = &[
    "command",
    "args",
    "port",
    "transport",
    "path",
    "on-demand",
    "env",
    "working-dir",
    "autostart",
    "restart",
    "stop",
    "health",
    // SPEC §16 (parsed in `parse/secrets.rs`).
    "env-file",
    "secrets",
    "hooks",
    "notify",
    // SPEC §17 (parsed in `parse/agent.rs`).
    "agent",
    // SPEC §20 (parsed in `parse/firewall.rs`).
    "firewall",
    // SPEC §21 (parsed in `parse/sandbox.rs`).
    "sandbox",
    // SPEC §22 (parsed in `parse/package.rs`).
    "package",
    // SPEC §23 (parsed in `parse/remote.rs`).
    "url",
    "headers",
    "auth",
];

/// Everything one file yields, including what the directory-level checks
/// need even when the file has other errors (its port, for duplicates).
pub(super) struct Parsed {
    /// The config, when the file had no error at all.
    pub(super) config: Option<ServerConfig>,
    /// The valid `port` and the byte span of its value.
    pub(super) port: Option<(u16, Range<usize>)>,
    /// The file text, shared with the diagnostics.
    pub(super) source: Arc<str>,
    /// Every error found, in document order.
    pub(super) diagnostics: Vec<ConfigDiagnostic>,
    /// The `sandbox` block's `reach` names and their spans, for the check
    /// that each names a server of the directory.
    pub(super) reach: Vec<(String, Range<usize>)>,
}

/// Parses one server config; `name` is the file stem.
pub fn parse_server(name: &str, file: &Path, src: &str) -> Result<ServerConfig, ConfigErrors> {
    let parsed = parse_file(name, file, src);
    match parsed.config {
        Some(config) if parsed.diagnostics.is_empty() => Ok(config),
        _ => Err(ConfigErrors::new(parsed.diagnostics)),
    }
}

/// The closest of `names` to `word`, if close enough to suggest.
pub(crate) fn suggest_name<'a>(word: &str, names: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// True for a valid server name: `[A-Za-z0-9_.-]+`, and not `.` or `..`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The walk of one server file: every top-level node read in document
/// order, then the whole-file rules, then the config when nothing failed.
pub(super) fn parse_file(name: &str, file: &Path, src: &str) -> Parsed {
    let source: Arc<str> = Arc::from(src);
    let mut cx = Cx {
        file,
        source: Arc::clone(&source),
        diags: Vec::new(),
    };
    checks::check_name(&mut cx, name);

    let doc = match KdlDocument::parse(src) {
        Ok(doc) => doc,
        Err(err) => {
            cx::syntax_errors(&mut cx, err);
            return Parsed {
                config: None,
                port: None,
                source,
                diagnostics: cx.diags,
                reach: Vec::new(),
            };
        }
    };

    let mut b = Builder::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for node in doc.nodes() {
        let key = node.name().value();
        let Some(field) = TOP_FIELDS.iter().find(|f| **f == key) else {
            cx.unknown_node(node, TOP_FIELDS, "at the top level");
            continue;
        };
        // `env-file` is repeatable.
        if *field != "env-file" && cx.duplicate(node, &mut seen) {
            continue;
        }
        match *field {
            "command" => {
                if let Some(e) = cx.single(node, "command \"/usr/local/bin/my-mcp\"")
                    && let Some(s) = cx.string(node, e, "command \"/usr/local/bin/my-mcp\"")
                {
                    if s.is_empty() {
                        cx.push(
                            cx.diag(DiagnosticKind::InvalidValue, e.span(), "`command` is empty")
                                .with_label("empty")
                                .with_help("give an absolute path or a program name on PATH"),
                        );
                    } else if cx.no_nul(e, &s, "`command`") {
                        b.command = Some(s);
                    }
                }
            }
            "args" => {
                cx.no_props(node);
                cx.no_children(node);
                let mut args = Vec::new();
                for e in node.entries().iter().filter(|e| e.name().is_none()) {
                    if let Some(s) = cx.string(node, e, "args \"--port\" \"8421\"")
                        && cx.no_nul(e, &s, "an argument")
                    {
                        args.push(s);
                    }
                }
                b.args = args;
            }
            "port" => {
                if let Some(e) = cx.single(node, "port 8421")
                    && let Some(n) = cx.integer(node, e, "port 8421")
                {
                    match u16::try_from(n) {
                        Ok(p) if p > 0 => b.port = Some((p, cx::range(e.span()))),
                        _ => cx.push(
                            cx.diag(
                                DiagnosticKind::InvalidValue,
                                e.span(),
                                format!("port {n} is out of range"),
                            )
                            .with_label("not in 1..=65535")
                            .with_help("use a TCP port between 1 and 65535"),
                        ),
                    }
                }
            }
            "autostart" => {
                let example = "autostart #false";
                if let Some(e) = cx.single(node, example) {
                    match e.value() {
                        KdlValue::Bool(v) => b.autostart = Some(*v),
                        _ => cx.wrong_type(
                            node,
                            e,
                            "a boolean",
                            "write #true or #false (KDL v1 files: true or false)".to_owned(),
                        ),
                    }
                }
            }
            "transport" => {
                let example = "transport \"stdio\"";
                if let Some(e) = cx.single(node, example)
                    && let Some(t) = cx.string(node, e, example)
                {
                    match Transport::from_name(&t) {
                        Some(t) => b.transport = (t, Some(e.span())),
                        None => {
                            b.transport_bad = true;
                            let mut help =
                                "allowed values: \"http\", \"stdio\", \"remote\"".to_owned();
                            if let Some(s) = cx::suggest(&t, &["http", "stdio", "remote"]) {
                                help = format!("did you mean \"{s}\"? {help}");
                            }
                            cx.push(
                                cx.diag(
                                    DiagnosticKind::InvalidValue,
                                    e.span(),
                                    format!("unknown transport {t:?}"),
                                )
                                .with_label("not a transport")
                                .with_help(help),
                            );
                        }
                    }
                }
            }
            "path" => {
                let example = "path \"/mcp\"";
                if let Some(e) = cx.single(node, example)
                    && let Some(p) = cx.string(node, e, example)
                {
                    if is_request_path(&p) {
                        b.path = Some(p);
                    } else {
                        cx.push(
                            cx.diag(
                                DiagnosticKind::InvalidValue,
                                e.span(),
                                format!(
                                    "`path` must start with `/` and hold no spaces, `?` or `#`, \
                                     found {p:?}"
                                ),
                            )
                            .with_label("not a request path")
                            .with_help(format!("e.g. {example}")),
                        );
                    }
                }
            }
            "on-demand" => {
                b.on_demand = Some((
                    lifecycle::parse_on_demand(&mut cx, node),
                    node.name().span(),
                ));
            }
            "env" => b.env = parse_env(&mut cx, node),
            "working-dir" => {
                if let Some(e) = cx.single(node, "working-dir \"/home/me/project\"")
                    && let Some(s) = cx.string(node, e, "working-dir \"/home/me/project\"")
                {
                    if !Path::new(&s).is_absolute() {
                        cx.push(
                            cx.diag(
                                DiagnosticKind::InvalidValue,
                                e.span(),
                                format!("`working-dir` must be an absolute path, found {s:?}"),
                            )
                            .with_label("not absolute")
                            .with_help(
                                "write the full path, e.g. \"/home/me/project\" \
                                 (~ and relative paths are not expanded)",
                            ),
                        );
                    } else if cx.no_nul(e, &s, "`working-dir`") {
                        b.working_dir = Some(PathBuf::from(s));
                    }
                }
            }
            "restart" => b.restart = lifecycle::parse_restart(&mut cx, node),
            "stop" => b.stop = lifecycle::parse_stop(&mut cx, node),
            "health" => b.health = health::parse_health(&mut cx, node),
            "env-file" => {
                if let Some(p) = secrets::parse_env_file(&mut cx, node, &mut b.file_env) {
                    b.env_files.push(p);
                }
            }
            "secrets" => b.secrets = secrets::parse_secrets(&mut cx, node),
            "hooks" => secrets::parse_hooks(&mut cx, node, &mut b.hooks),
            "notify" => {
                if let Some(on) = secrets::parse_notify(&mut cx, node) {
                    b.hooks.notify |= on;
                }
            }
            "agent" => b.agent = agent::parse_agent(&mut cx, node),
            "firewall" => b.firewall = firewall::parse_firewall(&mut cx, node),
            "sandbox" => b.sandbox = sandbox::parse_sandbox(&mut cx, node),
            "package" => b.package = package::parse_package(&mut cx, node),
            "url" => b.url = remote::parse_url(&mut cx, node),
            "headers" => {
                b.headers = Some((remote::parse_headers(&mut cx, node), node.name().span()));
            }
            "auth" => b.auth = Some((remote::parse_auth(&mut cx, node), node.name().span())),
            _ => unreachable!("every TOP_FIELDS entry is matched"),
        }
    }

    checks::file_rules(&mut cx, &doc, &mut b, &seen);
    let reach = sandbox::reach_spans(&doc);

    let port = b.port.clone();
    let remote = b.url.map(|(url, _)| crate::config::RemoteConfig {
        url,
        headers: b
            .headers
            .map(|(h, _)| h.into_iter().map(|h| h.spec).collect())
            .unwrap_or_default(),
        auth: b.auth.and_then(|(a, _)| a).map(|a| {
            let mut cfg = a.cfg;
            cfg.client_secret = a
                .secret
                .and_then(|(name, _)| b.secrets.iter().find(|s| s.name == name).cloned());
            cfg
        }),
    });
    let command = match (&remote, b.command) {
        (Some(_), _) => Some(String::new()),
        (None, c) => c,
    };
    let config = match (cx.diags.is_empty(), command, b.port) {
        (true, Some(command), Some((port, _))) => {
            let config = ServerConfig {
                name: name.to_owned(),
                source: file.to_path_buf(),
                command,
                args: b.args,
                port,
                transport: b.transport.0,
                remote,
                path: b.path.unwrap_or_else(|| DEFAULT_MCP_PATH.to_owned()),
                on_demand: b.on_demand.map(|(o, _)| o),
                env: secrets::merge_env(b.file_env, b.env),
                env_files: b.env_files,
                secrets: b.secrets,
                hooks: b.hooks,
                working_dir: b.working_dir,
                restart: b.restart,
                stop: b.stop,
                health: b.health,
                agent: b.agent,
                firewall: b.firewall,
                sandbox: b.sandbox,
                package: b.package,
                autostart: b.autostart.unwrap_or(true),
            };
            Some(config)
        }
        _ => None,
    };
    Parsed {
        config,
        port,
        source,
        diagnostics: cx.diags,
        reach,
    }
}

#[derive(Default)]
struct Builder {
    command: Option<String>,
    args: Vec<String>,
    port: Option<(u16, Range<usize>)>,
    /// The transport, and where it was written (`None`: the default).
    transport: (Transport, Option<SourceSpan>),
    transport_bad: bool,
    path: Option<String>,
    /// `on-demand`, and the span of its node name.
    on_demand: Option<(OnDemandConfig, SourceSpan)>,
    env: BTreeMap<String, String>,
    working_dir: Option<PathBuf>,
    restart: RestartConfig,
    stop: StopConfig,
    health: Option<HealthConfig>,
    /// SPEC §16: `env-file` variables in file order, and the files.
    file_env: Vec<(String, String)>,
    env_files: Vec<PathBuf>,
    secrets: Vec<super::SecretSpec>,
    hooks: super::HooksConfig,
    agent: super::AgentConfig,
    firewall: Option<crate::firewall::FirewallMode>,
    sandbox: Option<crate::sandbox::SandboxConfig>,
    package: Option<crate::package::PackageRef>,
    /// `autostart`; `None`: not written (`#true`).
    autostart: Option<bool>,
    /// SPEC §23: `url` and the span of its value.
    url: Option<(String, SourceSpan)>,
    /// `headers { }` (each with its `secret=` span) and its node's span.
    headers: Option<(Vec<remote::Header>, SourceSpan)>,
    /// `auth { }` (`None` inside after a diagnostic) and its node's span.
    auth: Option<(Option<remote::Auth>, SourceSpan)>,
}

fn parse_env(cx: &mut Cx<'_>, node: &KdlNode) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        let key = child.name().value();
        let example = format!("{key} \"value\"");
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            cx.push(
                cx.diag(
                    DiagnosticKind::InvalidValue,
                    child.name().span(),
                    format!("invalid environment variable name {key:?}"),
                )
                .with_label("not a variable name")
                .with_help("a name must be non-empty and contain no `=` or NUL"),
            );
            continue;
        }
        let Some(e) = cx.single(child, &example) else {
            continue;
        };
        // Environment values are strings to the child anyway: an integer or
        // boolean has one obvious spelling, and v1 configs write `true`.
        let value = match e.value() {
            KdlValue::Integer(n) => Some(n.to_string()),
            KdlValue::Bool(b) => Some(b.to_string()),
            _ => cx.string(child, e, &example),
        };
        if let Some(v) = value
            && cx.no_nul(e, &v, "an environment value")
        {
            env.insert(key.to_owned(), v);
        }
    }
    env
}

/// A path an HTTP request line can carry as is.
fn is_request_path(p: &str) -> bool {
    p.starts_with('/')
        && !p
            .chars()
            .any(|c| c.is_ascii_whitespace() || c.is_control() || c == '?' || c == '#')
}

/// Where a nested field belongs when written at the top level.
fn nested_home(key: &str) -> Option<&'static str> {
    if lifecycle::RESTART_FIELDS.contains(&key) {
        Some("restart")
    } else if lifecycle::STOP_FIELDS.contains(&key) {
        Some("stop")
    } else if lifecycle::ON_DEMAND_FIELDS.contains(&key) {
        Some("on-demand")
    } else if health::HEALTH_FIELDS.contains(&key) {
        Some("health")
    } else if agent::AGENT_FIELDS.contains(&key) {
        Some("agent")
    } else if firewall::FIREWALL_FIELDS.contains(&key) {
        Some("firewall")
    } else if sandbox::SANDBOX_FIELDS.contains(&key) {
        Some("sandbox")
    } else if remote::AUTH_FIELDS.contains(&key) {
        Some("auth")
    } else {
        None
    }
}
