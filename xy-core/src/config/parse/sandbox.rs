//! `sandbox { read …; write …; network …; allow-host …; env-pass …; reach … }`
//! (SPEC §21, §24: `env-pass "NAME"` names a variable of xyd's environment
//! the confined child gets besides the fixed list; `reach "<server>"` a
//! server its processes may use through xy; one or more per line).
//! `read`/`write` take one or more paths per line and may repeat; paths
//! are absolute or start with `~/`. `allow-host` lines need `network
//! "allow"` (written or implied by writing no `network`); `network "allow"`
//! needs at least one. Every mistake names file, line and column.

use kdl::KdlNode;
use miette::SourceSpan;

use super::cx::Cx;
use crate::protocol::DiagnosticKind;
use crate::sandbox::{HostPort, NetworkMode, SandboxConfig};

/// Children of `sandbox { … }`.
pub(super) const SANDBOX_FIELDS: &[&str] = &[
    "read",
    "write",
    "network",
    "allow-host",
    "env-pass",
    "reach",
];
/// The network modes, for suggestions.
const NETWORK_MODES: &[&str] = &["any", "none", "allow"];

/// Parses the block; `None` only when it had errors (they are pushed).
pub(super) fn parse_sandbox(cx: &mut Cx<'_>, node: &KdlNode) -> Option<SandboxConfig> {
    cx.no_props(node);
    let before = cx.diags.len();
    let mut config = SandboxConfig::default();
    let mut network: Option<(NetworkMode, SourceSpan)> = None;
    let mut first_host: Option<SourceSpan> = None;
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !SANDBOX_FIELDS.contains(&key) {
            cx.unknown_node(child, SANDBOX_FIELDS, "in `sandbox { }`");
            continue;
        }
        match key {
            "read" | "write" => {
                let example = format!("{key} \"~/notes\"");
                for path in strings(cx, child, &example) {
                    if let Some(p) = check_path(cx, child, path, key) {
                        if key == "read" {
                            config.read.push(p);
                        } else {
                            config.write.push(p);
                        }
                    }
                }
            }
            "network" => {
                if cx.duplicate(child, &mut seen) {
                    continue;
                }
                let example = "network \"none\"";
                if let Some(e) = cx.single(child, example)
                    && let Some(word) = cx.string(child, e, example)
                {
                    match NetworkMode::parse(&word) {
                        Some(m) => network = Some((m, e.span())),
                        None => {
                            let help = match super::cx::suggest(&word, NETWORK_MODES) {
                                Some(s) => format!("did you mean \"{s}\"?"),
                                None => "use \"any\" (no network rule), \"none\" (no \
                                         connections) or \"allow\" with allow-host lines"
                                    .to_owned(),
                            };
                            let d = cx
                                .diag(
                                    DiagnosticKind::InvalidValue,
                                    e.span(),
                                    format!("unknown network mode {word:?}"),
                                )
                                .with_label("not a mode")
                                .with_help(help);
                            cx.push(d);
                        }
                    }
                }
            }
            "allow-host" => {
                let example = "allow-host \"api.github.com:443\"";
                for e in child.entries().iter().filter(|e| e.name().is_none()) {
                    let Some(s) = cx.string(child, e, example) else {
                        continue;
                    };
                    match HostPort::parse(&s) {
                        Ok(h) => {
                            first_host.get_or_insert(e.span());
                            if !config.allow_hosts.contains(&h) {
                                config.allow_hosts.push(h);
                            }
                        }
                        Err(why) => {
                            let d = cx
                                .diag(
                                    DiagnosticKind::InvalidValue,
                                    e.span(),
                                    format!("`allow-host` {why}"),
                                )
                                .with_label("not host:port")
                                .with_help(format!("e.g. {example}"));
                            cx.push(d);
                        }
                    }
                }
                if child.entries().iter().all(|e| e.name().is_some()) {
                    strings(cx, child, example);
                }
            }
            "env-pass" => env_pass(cx, child, &mut config.env_pass),
            "reach" => parse_reach(cx, child, &mut config.reach),
            _ => unreachable!("every SANDBOX_FIELDS entry is matched"),
        }
    }
    config.network = match (network, first_host) {
        (Some((mode, _)), None) => mode,
        (None, None) => NetworkMode::Any,
        (None, Some(_)) | (Some((NetworkMode::Allow, _)), Some(_)) => NetworkMode::Allow,
        (Some((mode, span)), Some(_)) => {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    span,
                    format!(
                        "`allow-host` lines need network \"allow\", but this block says \
                         network \"{}\"",
                        mode.as_str()
                    ),
                )
                .with_label("contradicts allow-host")
                .with_help(
                    "write network \"allow\" to let the child reach only the allow-host \
                     lines, or remove them",
                );
            cx.push(d);
            mode
        }
    };
    if let Some((NetworkMode::Allow, span)) = network
        && config.allow_hosts.is_empty()
        && cx.diags.len() == before
    {
        let d = cx
            .diag(
                DiagnosticKind::MissingField,
                span,
                "network \"allow\" without any `allow-host` line allows nothing",
            )
            .with_label("no allow-host")
            .with_help(
                "add lines like allow-host \"api.github.com:443\", or write network \"none\"",
            );
        cx.push(d);
    }
    (cx.diags.len() == before).then_some(config)
}

/// `env-pass "NAME" …`: each a variable name, kept once.
fn env_pass(cx: &mut Cx<'_>, node: &KdlNode, out: &mut Vec<String>) {
    let example = "env-pass \"GITHUB_TOKEN\"";
    let bad = Bad {
        what: "a variable name",
        label: "not a name",
        help: format!("letters, digits and `_`, not starting with a digit, e.g. {example}"),
    };
    distinct_names(cx, node, example, crate::sandbox::is_env_name, &bad, out);
}

/// `reach "<server>" …`: server names, each valid; whether a server of
/// that name exists is checked across files (`load.rs`, [`reach_spans`]).
fn parse_reach(cx: &mut Cx<'_>, node: &KdlNode, reach: &mut Vec<String>) {
    let bad = Bad {
        what: "a server name",
        label: "not a server name",
        help: "name a server by its file name without .kdl, e.g. reach \"github\"".into(),
    };
    let example = "reach \"github\"";
    distinct_names(cx, node, example, crate::config::is_valid_name, &bad, reach);
}

/// How a list line names a value that is not valid.
struct Bad {
    what: &'static str,
    label: &'static str,
    help: String,
}

/// The string arguments of a list line (`env-pass`, `reach`), each kept
/// once in `out` when `valid`, else a diagnostic at its own entry.
fn distinct_names(
    cx: &mut Cx<'_>,
    node: &KdlNode,
    example: &str,
    valid: fn(&str) -> bool,
    bad: &Bad,
    out: &mut Vec<String>,
) {
    for name in strings(cx, node, example) {
        if valid(&name) {
            if !out.contains(&name) {
                out.push(name);
            }
            continue;
        }
        let span = node
            .entries()
            .iter()
            .find(|e| e.value().as_string() == Some(name.as_str()))
            .map_or(node.name().span(), kdl::KdlEntry::span);
        let key = node.name().value();
        let d = cx
            .diag(
                DiagnosticKind::InvalidValue,
                span,
                format!("`{key}` {name:?} is not {}", bad.what),
            )
            .with_label(bad.label)
            .with_help(bad.help.clone());
        cx.push(d);
    }
}

/// Every `reach` name of a file's `sandbox` blocks with the byte span of
/// its value, for the check that each names a configured server.
pub(crate) fn reach_spans(doc: &kdl::KdlDocument) -> Vec<(String, std::ops::Range<usize>)> {
    doc.nodes()
        .iter()
        .filter(|n| n.name().value() == "sandbox")
        .filter_map(|n| n.children())
        .flat_map(|c| c.nodes())
        .filter(|n| n.name().value() == "reach")
        .flat_map(|n| n.entries())
        .filter(|e| e.name().is_none())
        .filter_map(|e| {
            let s = e.value().as_string()?;
            let span = e.span();
            Some((s.to_owned(), span.offset()..span.offset() + span.len()))
        })
        .collect()
}

/// The string arguments of `node` (at least one).
fn strings(cx: &mut Cx<'_>, node: &KdlNode, example: &str) -> Vec<String> {
    cx.no_props(node);
    cx.no_children(node);
    let mut out = Vec::new();
    let args: Vec<_> = node
        .entries()
        .iter()
        .filter(|e| e.name().is_none())
        .collect();
    if args.is_empty() {
        let d = cx
            .diag(
                DiagnosticKind::WrongType,
                node.name().span(),
                format!("`{}` needs a value", node.name().value()),
            )
            .with_label("no value")
            .with_help(format!("e.g. {example}"));
        cx.push(d);
    }
    for e in args {
        if let Some(s) = cx.string(node, e, example)
            && cx.no_nul(e, &s, "a path")
        {
            out.push(s);
        }
    }
    out
}

/// A path must be absolute or `~/…`; `..` components are refused (they
/// would make what the rule covers depend on symlinks the user cannot see).
fn check_path(cx: &mut Cx<'_>, node: &KdlNode, path: String, key: &str) -> Option<String> {
    let span = node
        .entries()
        .iter()
        .find(|e| e.value().as_string() == Some(path.as_str()))
        .map_or(node.name().span(), kdl::KdlEntry::span);
    let absolute = path.starts_with('/') || path == "~" || path.starts_with("~/");
    let dotdot = std::path::Path::new(&path)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir));
    if absolute && !dotdot {
        return Some(path);
    }
    let d = cx
        .diag(
            DiagnosticKind::InvalidValue,
            span,
            if dotdot {
                format!("`{key}` path {path:?} contains `..`")
            } else {
                format!("`{key}` path {path:?} is not absolute")
            },
        )
        .with_label("not an absolute path")
        .with_help(format!(
            "write a full path or one under the home directory, e.g. {key} \"~/notes\""
        ));
    cx.push(d);
    None
}
