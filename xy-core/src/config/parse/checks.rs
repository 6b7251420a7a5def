//! The whole-file rules of a server file: what no single node can decide
//! and is checked over what the walk collected — the file name, the
//! required fields, `on-demand` only for a stdio server, and a remote
//! server's rules (SPEC §23: `url` xor `command`, no process settings,
//! every `secret=` declared).

use kdl::KdlDocument;
use miette::SourceSpan;

use super::cx::Cx;
use super::{Builder, is_valid_name, remote};
use crate::config::HeaderValueSpec;
use crate::config::diagnostic::ConfigDiagnostic;
use crate::protocol::{DiagnosticKind, Transport};

/// The file stem must be a valid server name; the diagnostic suggests one.
pub(super) fn check_name(cx: &mut Cx<'_>, name: &str) {
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

/// Every rule that needs the whole file, after the walk, in the order the
/// diagnostics appear.
pub(super) fn file_rules(
    cx: &mut Cx<'_>,
    doc: &KdlDocument,
    b: &mut Builder,
    seen: &[(&str, usize)],
) {
    let is_remote = seen.iter().any(|(k, _)| *k == "url");
    remote_checks(cx, doc, b, is_remote);
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
            if let (HeaderValueSpec::Secret(name), Some(span)) = (&h.value, secret_at) {
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
