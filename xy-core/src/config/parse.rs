//! The typed mapping from a KDL document (v2, v1 fallback) to a
//! [`ServerConfig`](super::ServerConfig), with a diagnostic per mistake: the
//! walk never stops at the first error, so one `config check` shows them all.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use miette::SourceSpan;

mod agent;
mod firewall;
mod package;
mod remote;
mod sandbox;
mod secrets;
pub(super) mod settings;

use super::diagnostic::ConfigDiagnostic;
use super::{
    ConfigErrors, HealthConfig, OnDemandConfig, ProbeKind, RestartConfig, RestartPolicy,
    ServerConfig, StopConfig,
};
use crate::protocol::DiagnosticKind;
use crate::protocol::{DEFAULT_MCP_PATH, Transport};

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
/// Children of `restart { … }`.
const RESTART_FIELDS: &[&str] = &[
    "policy",
    "backoff-initial",
    "backoff-max",
    "max-retries-per-minute",
];
/// Children of `on-demand { … }`.
const ON_DEMAND_FIELDS: &[&str] = &["idle-stop"];
/// Children of `stop { … }`.
const STOP_FIELDS: &[&str] = &["grace"];
/// The probe kinds inside `health { … }` (exactly one).
const PROBE_KINDS: &[&str] = &["mcp", "http", "tcp"];
/// Children of `health { … }`.
const HEALTH_FIELDS: &[&str] = &[
    "mcp",
    "http",
    "tcp",
    "interval",
    "timeout",
    "failures",
    "start-period",
    "restart-on-failure",
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
}

/// Parses one server config; `name` is the file stem.
pub fn parse_server(name: &str, file: &Path, src: &str) -> Result<ServerConfig, ConfigErrors> {
    let parsed = parse_file(name, file, src);
    match parsed.config {
        Some(config) if parsed.diagnostics.is_empty() => Ok(config),
        _ => Err(ConfigErrors::new(parsed.diagnostics)),
    }
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

pub(super) fn parse_file(name: &str, file: &Path, src: &str) -> Parsed {
    let source: Arc<str> = Arc::from(src);
    let mut cx = Cx {
        file,
        source: Arc::clone(&source),
        diags: Vec::new(),
    };
    check_name(&mut cx, name);

    let doc = match KdlDocument::parse(src) {
        Ok(doc) => doc,
        Err(err) => {
            syntax_errors(&mut cx, err);
            return Parsed {
                config: None,
                port: None,
                source,
                diagnostics: cx.diags,
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
                        Ok(p) if p > 0 => b.port = Some((p, range(e.span()))),
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
                            if let Some(s) = suggest(&t, &["http", "stdio", "remote"]) {
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
            "on-demand" => b.on_demand = Some((parse_on_demand(&mut cx, node), node.name().span())),
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
            "restart" => b.restart = parse_restart(&mut cx, node),
            "stop" => b.stop = parse_stop(&mut cx, node),
            "health" => b.health = parse_health(&mut cx, node),
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

    let is_remote = seen.iter().any(|(k, _)| *k == "url");
    remote_checks(&mut cx, &doc, &mut b, is_remote);
    // A missing field has no text to point at: point at the start of the
    // file, where it would go.
    if b.command.is_none() && !seen.iter().any(|(k, _)| *k == "command" || *k == "url") {
        cx.push(
            cx.diag(
                DiagnosticKind::MissingField,
                SourceSpan::from(0..0),
                "missing required field `command`",
            )
            .with_label("`command` is required")
            .with_help(
                "add a line like: command \"/usr/local/bin/my-mcp\" (or url \"https://…/mcp\" \
                 for a remote server)",
            ),
        );
    }
    if b.port.is_none() && !seen.iter().any(|(k, _)| *k == "port") {
        cx.push(
            cx.diag(
                DiagnosticKind::MissingField,
                SourceSpan::from(0..0),
                "missing required field `port`",
            )
            .with_label("`port` is required")
            .with_help("add a line like: port 8421"),
        );
    }

    // An unknown transport is reported already; guessing on top helps nobody.
    if let Some((_, span)) = &b.on_demand
        && b.transport.0 != Transport::Stdio
        && !b.transport_bad
        && !is_remote
    {
        let mut d = cx
            .diag(
                DiagnosticKind::InvalidValue,
                *span,
                "`on-demand` needs `transport \"stdio\"`: xy can start only a server whose \
                 port it listens on itself",
            )
            .with_label("only for stdio servers");
        d = match b.transport.1 {
            Some(_) => {
                d.with_help("remove `on-demand`, or serve the server with transport \"stdio\"")
            }
            None => d.with_help(
                "this server is `transport \"http\"` (the default): add transport \"stdio\" \
                 if it speaks MCP on stdin/stdout, else remove `on-demand`",
            ),
        };
        cx.push(d);
    }

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

/// The whole-file rules of a remote server (SPEC §23): `url` xor
/// `command`, `transport "remote"` exactly with `url`, `headers`/`auth`
/// only with `url`, no process settings, every `secret=` declared.
fn remote_checks(cx: &mut Cx<'_>, doc: &KdlDocument, b: &mut Builder, is_remote: bool) {
    let node_span = |key: &str| {
        doc.nodes()
            .iter()
            .find(|n| n.name().value() == key)
            .map(|n| n.name().span())
    };
    if !is_remote {
        if b.transport.0 == Transport::Remote
            && let Some(span) = b.transport.1
        {
            let d = cx
                .diag(
                    DiagnosticKind::MissingField,
                    span,
                    "`transport \"remote\"` needs `url \"https://…\"`",
                )
                .with_label("no url")
                .with_help("add a line like: url \"https://mcp.example.com/mcp\"");
            cx.push(d);
        }
        for key in ["headers", "auth"] {
            if let Some(span) = node_span(key) {
                let d = cx
                    .diag(
                        DiagnosticKind::InvalidValue,
                        span,
                        format!("`{key}` is for remote servers (`url \"https://…\"`) only"),
                    )
                    .with_label("not a remote server")
                    .with_help(
                        "a local server gets its credentials through `env` or `secrets { }`",
                    );
                cx.push(d);
            }
        }
        return;
    }
    if let Some(span) = node_span("command") {
        let d = cx
            .diag(
                DiagnosticKind::InvalidValue,
                span,
                "`command` and `url` are given together: a server is either a program xy runs \
                 or a remote one it reaches",
            )
            .with_label("remove one")
            .with_help("keep `url` for a remote server, or `command` for a local one");
        cx.push(d);
    }
    match b.transport {
        (Transport::Remote, _) => {}
        (t, Some(span)) if !b.transport_bad => {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    span,
                    format!(
                        "a `url` server is `transport \"remote\"`, not {:?}",
                        t.as_str()
                    ),
                )
                .with_label("not remote")
                .with_help("remove `transport` (a `url` implies \"remote\")");
            cx.push(d);
        }
        _ => {}
    }
    b.transport.0 = Transport::Remote;
    for key in remote::NOT_FOR_REMOTE {
        if let Some(span) = node_span(key) {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    span,
                    format!("`{key}` does not apply to a remote server: xy runs no process for it"),
                )
                .with_label("not for a remote server")
                .with_help(format!("remove `{key}`"));
            cx.push(d);
        }
    }
    let mut named: Vec<(String, &str, SourceSpan)> = Vec::new();
    if let Some((headers, _)) = &b.headers {
        for remote::Header { spec: h, secret_at } in headers {
            if let (crate::config::HeaderValueSpec::Secret(name), Some(span)) =
                (&h.value, secret_at)
            {
                named.push((format!("header {}", h.name), name, *span));
            }
        }
    }
    if let Some((
        Some(remote::Auth {
            secret: Some((name, span)),
            ..
        }),
        _,
    )) = &b.auth
    {
        named.push(("`client-secret`".to_owned(), name, *span));
    }
    for (what, name, span) in named {
        if b.secrets.iter().any(|s| s.name == name) {
            continue;
        }
        let known: Vec<&str> = b.secrets.iter().map(|s| s.name.as_str()).collect();
        let help = if known.is_empty() {
            format!("declare it in this file: secrets {{ {name} file=\"~/.config/xy/{name}\" }}")
        } else {
            format!("declared here: {}", known.join(", "))
        };
        let d = cx
            .diag(
                DiagnosticKind::InvalidValue,
                span,
                format!("{what} names secret {name:?}, which `secrets {{ }}` does not declare"),
            )
            .with_label("unknown secret")
            .with_help(help);
        cx.push(d);
    }
}

fn check_name(cx: &mut Cx<'_>, name: &str) {
    if is_valid_name(name) {
        return;
    }
    let fixed: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let help = if is_valid_name(&fixed) {
        format!("rename the file, e.g. to `{fixed}.kdl`")
    } else {
        "rename the file: a name is letters, digits, `_`, `.` and `-`".to_owned()
    };
    cx.diags.push(
        ConfigDiagnostic::new(
            DiagnosticKind::BadName,
            cx.file,
            format!(
                "invalid server name {name:?}: a name may contain only letters, digits, \
                 `_`, `.` and `-`"
            ),
        )
        .with_help(help),
    );
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

fn parse_restart(cx: &mut Cx<'_>, node: &KdlNode) -> RestartConfig {
    let mut r = RestartConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut initial_span = None;
    let mut max_span = None;
    for child in cx.block(node) {
        let key = child.name().value();
        if !RESTART_FIELDS.contains(&key) {
            cx.unknown_node(child, RESTART_FIELDS, "in `restart { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        match key {
            "policy" => {
                let example = "policy \"on-failure\"";
                if let Some(e) = cx.single(child, example)
                    && let Some(s) = cx.string(child, e, example)
                {
                    match RestartPolicy::from_name(&s) {
                        Some(p) => r.policy = p,
                        None => {
                            let mut help =
                                "allowed values: \"always\", \"on-failure\", \"never\"".to_owned();
                            if let Some(s) = suggest(&s, &["always", "on-failure", "never"]) {
                                help = format!("did you mean \"{s}\"? {help}");
                            }
                            cx.push(
                                cx.diag(
                                    DiagnosticKind::InvalidValue,
                                    e.span(),
                                    format!("unknown restart policy {s:?}"),
                                )
                                .with_label("not a policy")
                                .with_help(help),
                            );
                        }
                    }
                }
            }
            "backoff-initial" => {
                if let Some((d, span)) = cx.duration_node(child) {
                    r.backoff_initial = d;
                    initial_span = Some(span);
                }
            }
            "backoff-max" => {
                if let Some((d, span)) = cx.duration_node(child) {
                    r.backoff_max = d;
                    max_span = Some(span);
                }
            }
            "max-retries-per-minute" => {
                let example = "max-retries-per-minute 5";
                if let Some(e) = cx.single(child, example)
                    && let Some(n) = cx.integer(child, e, example)
                {
                    match u32::try_from(n) {
                        Ok(n) => r.max_retries_per_minute = n,
                        Err(_) => {
                            let (message, label) = if n < 0 {
                                (
                                    format!(
                                        "`max-retries-per-minute` must not be negative, found {n}"
                                    ),
                                    "negative",
                                )
                            } else {
                                (
                                    format!("`max-retries-per-minute` {n} is too large"),
                                    "too large",
                                )
                            };
                            cx.push(
                                cx.diag(DiagnosticKind::InvalidValue, e.span(), message)
                                    .with_label(label)
                                    .with_help("give a whole number from 0 up, e.g. max-retries-per-minute 5"),
                            );
                        }
                    }
                }
            }
            _ => unreachable!("every RESTART_FIELDS entry is matched"),
        }
    }
    if r.backoff_initial > r.backoff_max {
        let span = initial_span.or(max_span);
        if let Some(span) = span {
            let initial = humantime::format_duration(r.backoff_initial);
            let max = humantime::format_duration(r.backoff_max);
            let max_note = if max_span.is_none() {
                ", the default"
            } else {
                ""
            };
            cx.push(
                cx.diag(
                    DiagnosticKind::InvalidValue,
                    span,
                    format!(
                        "`backoff-initial` ({initial}) is greater than `backoff-max` \
                         ({max}{max_note})"
                    ),
                )
                .with_label("larger than backoff-max")
                .with_help("backoff-max caps the delay: make it at least backoff-initial"),
            );
        }
    }
    r
}

fn parse_on_demand(cx: &mut Cx<'_>, node: &KdlNode) -> OnDemandConfig {
    let mut o = OnDemandConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !ON_DEMAND_FIELDS.contains(&key) {
            cx.unknown_node(child, ON_DEMAND_FIELDS, "in `on-demand { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        if let Some((d, span)) = cx.duration_node(child) {
            if d.is_zero() {
                let d = cx
                    .diag(
                        DiagnosticKind::InvalidValue,
                        span,
                        "`idle-stop` must be longer than zero",
                    )
                    .with_label("zero")
                    .with_help("e.g. idle-stop \"10m\"");
                cx.push(d);
            } else {
                o.idle_stop = d;
            }
        }
    }
    o
}

/// A path an HTTP request line can carry as is.
fn is_request_path(p: &str) -> bool {
    p.starts_with('/')
        && !p
            .chars()
            .any(|c| c.is_ascii_whitespace() || c.is_control() || c == '?' || c == '#')
}

fn parse_stop(cx: &mut Cx<'_>, node: &KdlNode) -> StopConfig {
    let mut s = StopConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !STOP_FIELDS.contains(&key) {
            cx.unknown_node(child, STOP_FIELDS, "in `stop { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        if let Some((d, _)) = cx.duration_node(child) {
            s.grace = d;
        }
    }
    s
}

fn parse_health(cx: &mut Cx<'_>, node: &KdlNode) -> Option<HealthConfig> {
    let mut probe: Option<ProbeKind> = None;
    let mut h = HealthConfig::new(ProbeKind::Tcp);
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut probe_line: Option<(&str, usize)> = None;
    let mut ok = true;
    for child in cx.block(node) {
        let key = child.name().value();
        if !HEALTH_FIELDS.contains(&key) {
            cx.unknown_node(child, HEALTH_FIELDS, "in `health { }`");
            ok = false;
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            ok = false;
            continue;
        }
        if PROBE_KINDS.contains(&key) {
            if let Some((first, line)) = probe_line {
                let d = cx
                    .diag(
                        DiagnosticKind::DuplicateNode,
                        child.name().span(),
                        format!(
                            "`health` takes exactly one probe, found `{first}` (line {line}) \
                             and `{key}`"
                        ),
                    )
                    .with_label("second probe")
                    .with_help("keep one of: mcp \"/mcp\", http \"/path\", tcp");
                cx.push(d);
                ok = false;
                continue;
            }
            probe_line = Some((key, cx.line_of(child.name().span())));
            probe = parse_probe(cx, child);
            ok &= probe.is_some();
            continue;
        }
        match key {
            "interval" | "timeout" | "start-period" => match cx.duration_node(child) {
                Some((d, span)) => {
                    if d.is_zero() && key != "start-period" {
                        let d = cx
                            .diag(
                                DiagnosticKind::InvalidValue,
                                span,
                                format!("`{key}` must be longer than zero"),
                            )
                            .with_label("zero")
                            .with_help(format!("e.g. {key} \"2s\""));
                        cx.push(d);
                        ok = false;
                    } else if key == "interval" {
                        h.interval = d;
                    } else if key == "timeout" {
                        h.timeout = d;
                    } else {
                        h.start_period = d;
                    }
                }
                None => ok = false,
            },
            "failures" => {
                let example = "failures 3";
                match cx
                    .single(child, example)
                    .and_then(|e| cx.integer(child, e, example).map(|n| (e, n)))
                {
                    Some((e, n)) => match u32::try_from(n) {
                        Ok(n) if n > 0 => h.failures = n,
                        _ => {
                            let d = cx
                                .diag(
                                    DiagnosticKind::InvalidValue,
                                    e.span(),
                                    format!("`failures` must be at least 1, found {n}"),
                                )
                                .with_label("not a positive count")
                                .with_help("e.g. failures 3");
                            cx.push(d);
                            ok = false;
                        }
                    },
                    None => ok = false,
                }
            }
            "restart-on-failure" => {
                let example = "restart-on-failure #true";
                match cx.single(child, example) {
                    Some(e) => match e.value() {
                        KdlValue::Bool(b) => h.restart_on_failure = *b,
                        _ => {
                            cx.wrong_type(
                                child,
                                e,
                                "a boolean",
                                "write #true or #false (KDL v1 files: true or false)".to_owned(),
                            );
                            ok = false;
                        }
                    },
                    None => ok = false,
                }
            }
            _ => unreachable!("every HEALTH_FIELDS entry is matched"),
        }
    }
    if probe_line.is_none() {
        let d = cx
            .diag(
                DiagnosticKind::MissingField,
                node.name().span(),
                "`health` needs a probe: `mcp`, `http` or `tcp`",
            )
            .with_label("no probe")
            .with_help("add one of: mcp \"/mcp\", http \"/healthz\", tcp");
        cx.push(d);
        return None;
    }
    h.probe = probe?;
    ok.then_some(h)
}

/// `mcp ["/path"]`, `http ["/path"]` or `tcp`.
fn parse_probe(cx: &mut Cx<'_>, node: &KdlNode) -> Option<ProbeKind> {
    let key = node.name().value();
    cx.no_props(node);
    cx.no_children(node);
    let args: Vec<&KdlEntry> = node
        .entries()
        .iter()
        .filter(|e| e.name().is_none())
        .collect();
    if key == "tcp" {
        if let (Some(first), Some(last)) = (args.first(), args.last()) {
            let span =
                SourceSpan::from(first.span().offset()..last.span().offset() + last.span().len());
            let d = cx
                .diag(
                    DiagnosticKind::WrongType,
                    span,
                    "`tcp` takes no value: it connects to the server's `port`",
                )
                .with_label("unexpected value")
                .with_help("write just: tcp");
            cx.push(d);
            return None;
        }
        return Some(ProbeKind::Tcp);
    }
    let example = format!("{key} \"/{key}\"");
    let path = match args.as_slice() {
        [] => if key == "mcp" { "/mcp" } else { "/" }.to_owned(),
        [one] => cx.string(node, one, &example)?,
        [_, extra @ ..] => {
            let last = extra[extra.len() - 1];
            let span = SourceSpan::from(
                extra[0].span().offset()..last.span().offset() + last.span().len(),
            );
            let d = cx
                .diag(
                    DiagnosticKind::WrongType,
                    span,
                    format!("`{key}` takes one path, found {}", args.len()),
                )
                .with_label("extra value")
                .with_help(format!("e.g. {example}"));
            cx.push(d);
            return None;
        }
    };
    if !path.starts_with('/')
        || path
            .chars()
            .any(|c| c.is_ascii_whitespace() || c.is_control())
    {
        let span = args.first().map_or(node.name().span(), |e| e.span());
        let d = cx
            .diag(
                DiagnosticKind::InvalidValue,
                span,
                format!("`{key}` path must start with `/` and hold no spaces, found {path:?}"),
            )
            .with_label("not a request path")
            .with_help(format!("e.g. {example}"));
        cx.push(d);
        return None;
    }
    Some(if key == "mcp" {
        ProbeKind::Mcp(path)
    } else {
        ProbeKind::Http(path)
    })
}

/// One diagnostic per mistake the KDL parser found.
fn syntax_errors(cx: &mut Cx<'_>, err: kdl::KdlError) {
    for d in err.diagnostics {
        let message = d
            .message
            .clone()
            .or_else(|| d.label.clone())
            .unwrap_or_else(|| "invalid KDL".to_owned());
        let mut diag = cx
            .diag(
                DiagnosticKind::Syntax,
                d.span,
                format!("invalid KDL: {message}"),
            )
            .with_help(d.help.unwrap_or_else(|| {
                "see https://kdl.dev for the syntax (v2; v1 also accepted)".to_owned()
            }));
        if let Some(label) = d.label {
            diag = diag.with_label(label);
        }
        cx.diags.push(diag);
    }
}

/// The closest of `candidates` to `name` when close enough to be a typo:
/// `working_dir` → `working-dir`, `comand` → `command`.
fn suggest(name: &str, candidates: &[&'static str]) -> Option<&'static str> {
    let norm = name.to_ascii_lowercase().replace(['_', ' '], "-");
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(&norm, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn range(span: SourceSpan) -> Range<usize> {
    span.offset()..span.offset() + span.len()
}

fn type_name(v: &KdlValue) -> &'static str {
    match v {
        KdlValue::String(_) => "a string",
        KdlValue::Integer(_) => "an integer",
        KdlValue::Float(_) => "a number with a fraction",
        KdlValue::Bool(_) => "a boolean",
        KdlValue::Null => "null",
    }
}

/// The per-file walk state: where we are and what went wrong so far.
struct Cx<'f> {
    file: &'f Path,
    source: Arc<str>,
    diags: Vec<ConfigDiagnostic>,
}

impl Cx<'_> {
    fn diag(
        &self,
        kind: DiagnosticKind,
        span: SourceSpan,
        message: impl Into<String>,
    ) -> ConfigDiagnostic {
        ConfigDiagnostic::new(kind, self.file, message).at(&self.source, range(span))
    }

    fn push(&mut self, d: ConfigDiagnostic) {
        self.diags.push(d);
    }

    fn line_of(&self, span: SourceSpan) -> usize {
        super::diagnostic::line_col(&self.source, span.offset()).0
    }

    fn unknown_node(&mut self, node: &KdlNode, known: &[&'static str], place: &str) {
        let key = node.name().value();
        let help = if let Some(s) = suggest(key, known) {
            format!("did you mean {s}?")
        } else if let Some(home) = nested_home(key) {
            format!("`{key}` belongs inside `{home} {{ }}`")
        } else {
            format!("known here: {}", known.join(", "))
        };
        let d = self
            .diag(
                DiagnosticKind::UnknownNode,
                node.name().span(),
                format!("unknown node `{key}` {place}"),
            )
            .with_label("unknown node")
            .with_help(help);
        self.push(d);
    }

    /// Reports a second occurrence of `node`'s name; true means skip it.
    fn duplicate<'n>(&mut self, node: &'n KdlNode, seen: &mut Vec<(&'n str, usize)>) -> bool {
        let key = node.name().value();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            let d = self
                .diag(
                    DiagnosticKind::DuplicateNode,
                    node.name().span(),
                    format!("`{key}` is given twice (first on line {first})"),
                )
                .with_label("duplicate")
                .with_help(format!("keep one `{key}`; a value can be given only once"));
            self.push(d);
            return true;
        }
        seen.push((key, self.line_of(node.name().span())));
        false
    }

    /// Every `key=value` property is an error: no node takes properties.
    fn no_props(&mut self, node: &KdlNode) {
        for e in node.entries() {
            if let Some(name) = e.name() {
                let d = self
                    .diag(
                        DiagnosticKind::WrongType,
                        e.span(),
                        format!(
                            "`{}` does not take properties (found `{}=…`)",
                            node.name().value(),
                            name.value()
                        ),
                    )
                    .with_label("property")
                    .with_help("xy configs use plain values, e.g. `port 8421`, not `key=value`");
                self.push(d);
            }
        }
    }

    fn no_children(&mut self, node: &KdlNode) {
        if let Some(children) = node.children() {
            let d = self
                .diag(
                    DiagnosticKind::WrongType,
                    children.span(),
                    format!("`{}` does not take a `{{ … }}` block", node.name().value()),
                )
                .with_label("unexpected block")
                .with_help("remove the braces and what is inside them");
            self.push(d);
        }
    }

    /// The child nodes of a block node (`env`, `restart`, `stop`), which
    /// takes no values itself.
    fn block<'n>(&mut self, node: &'n KdlNode) -> &'n [KdlNode] {
        self.no_props(node);
        let args: Vec<&KdlEntry> = node
            .entries()
            .iter()
            .filter(|e| e.name().is_none())
            .collect();
        if let (Some(first), Some(last)) = (args.first(), args.last()) {
            let key = node.name().value();
            let span =
                SourceSpan::from(first.span().offset()..last.span().offset() + last.span().len());
            let d = self
                .diag(
                    DiagnosticKind::WrongType,
                    span,
                    format!("`{key}` takes a `{{ … }}` block, not values"),
                )
                .with_label("unexpected value")
                .with_help(format!("write the settings inside braces: {key} {{ … }}"));
            self.push(d);
        }
        node.children().map_or(&[], |c| c.nodes())
    }

    /// The one value of a leaf node; errors for none, extras, properties
    /// and blocks. Extras are reported but the first value is still checked.
    fn single<'n>(&mut self, node: &'n KdlNode, example: &str) -> Option<&'n KdlEntry> {
        self.no_props(node);
        self.no_children(node);
        let key = node.name().value();
        let args: Vec<&KdlEntry> = node
            .entries()
            .iter()
            .filter(|e| e.name().is_none())
            .collect();
        match args.as_slice() {
            // A lone property was reported by `no_props` already.
            [] if node.entries().iter().any(|e| e.name().is_some()) => None,
            [] => {
                let d = self
                    .diag(
                        DiagnosticKind::WrongType,
                        node.name().span(),
                        format!("`{key}` needs a value"),
                    )
                    .with_label("no value")
                    .with_help(format!("e.g. {example}"));
                self.push(d);
                None
            }
            [one] => Some(one),
            [first, extra @ ..] => {
                let (second, last) = (extra[0], extra[extra.len() - 1]);
                let span = SourceSpan::from(
                    second.span().offset()..last.span().offset() + last.span().len(),
                );
                let d = self
                    .diag(
                        DiagnosticKind::WrongType,
                        span,
                        format!("`{key}` takes exactly one value, found {}", args.len()),
                    )
                    .with_label("extra value")
                    .with_help(format!("e.g. {example}"));
                self.push(d);
                Some(first)
            }
        }
    }

    fn wrong_type(&mut self, node: &KdlNode, e: &KdlEntry, expected: &str, help: String) {
        let key = node.name().value();
        let d = self
            .diag(
                DiagnosticKind::WrongType,
                e.span(),
                format!("`{key}` expects {expected}, found {}", type_name(e.value())),
            )
            .with_label(format!("expected {expected}"))
            .with_help(help);
        self.push(d);
    }

    fn string(&mut self, node: &KdlNode, e: &KdlEntry, example: &str) -> Option<String> {
        match e.value() {
            KdlValue::String(s) => Some(s.clone()),
            v => {
                let help = match v {
                    KdlValue::Integer(n) => format!("quote it: \"{n}\" (e.g. {example})"),
                    KdlValue::Float(f) => format!("quote it: \"{f}\" (e.g. {example})"),
                    KdlValue::Bool(b) => format!("quote it: \"{b}\" (e.g. {example})"),
                    _ => format!("e.g. {example}"),
                };
                self.wrong_type(node, e, "a string", help);
                None
            }
        }
    }

    fn integer(&mut self, node: &KdlNode, e: &KdlEntry, example: &str) -> Option<i128> {
        match e.value() {
            KdlValue::Integer(n) => Some(*n),
            KdlValue::String(s) if s.trim().parse::<i128>().is_ok() => {
                let help = format!("remove the quotes: {} {}", node.name().value(), s.trim());
                self.wrong_type(node, e, "an integer", help);
                None
            }
            _ => {
                self.wrong_type(node, e, "an integer", format!("e.g. {example}"));
                None
            }
        }
    }

    /// A leaf node holding one humantime duration string.
    fn duration_node(&mut self, node: &KdlNode) -> Option<(Duration, SourceSpan)> {
        let key = node.name().value();
        let example = format!("{key} \"10s\"");
        let e = self.single(node, &example)?;
        let s = match e.value() {
            KdlValue::String(s) => s,
            KdlValue::Integer(n) => {
                let help = format!("add a unit and quotes: {key} \"{n}s\"");
                self.wrong_type(node, e, "a duration string", help);
                return None;
            }
            _ => {
                self.wrong_type(node, e, "a duration string", format!("e.g. {example}"));
                return None;
            }
        };
        match crate::time::parse_duration(s) {
            Ok(d) => Some((d, e.span())),
            Err(err) => {
                let d = self
                    .diag(
                        DiagnosticKind::BadDuration,
                        e.span(),
                        format!("invalid duration {s:?} for `{key}`: {err}"),
                    )
                    .with_label("not a duration")
                    .with_help("write a duration like \"500ms\", \"10s\" or \"1m 30s\"");
                self.push(d);
                None
            }
        }
    }

    /// Strings that end up in `execve` cannot hold NUL.
    fn no_nul(&mut self, e: &KdlEntry, s: &str, what: &str) -> bool {
        if !s.contains('\0') {
            return true;
        }
        let d = self
            .diag(
                DiagnosticKind::InvalidValue,
                e.span(),
                format!("{what} contains a NUL character"),
            )
            .with_label("NUL")
            .with_help("remove the \\0: processes cannot receive it");
        self.push(d);
        false
    }
}

/// Where a nested field belongs when written at the top level.
fn nested_home(key: &str) -> Option<&'static str> {
    if RESTART_FIELDS.contains(&key) {
        Some("restart")
    } else if STOP_FIELDS.contains(&key) {
        Some("stop")
    } else if ON_DEMAND_FIELDS.contains(&key) {
        Some("on-demand")
    } else if HEALTH_FIELDS.contains(&key) {
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
