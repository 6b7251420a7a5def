//! A remote server's nodes (SPEC §23): `url "https://…"` in place of
//! `command`, `headers { Name "literal" }` / `headers { Name secret="NAME" }`
//! and `auth { oauth; scopes "a" "b"; client-id "…" }`, and the list of
//! nodes that make no sense without a process. The rules that need the
//! whole file (exactly one of `url` and `command`, every `secret="NAME"`
//! declared in the same file's `secrets { }`, those nodes refused where
//! they are written) are `checks.rs`'s.

use kdl::{KdlNode, KdlValue};
use miette::SourceSpan;

use super::cx::Cx;
use crate::config::{HeaderSpec, HeaderValueSpec, OAuthConfig};
use crate::protocol::DiagnosticKind;

/// Children of `auth { … }`.
pub(super) const AUTH_FIELDS: &[&str] = &["oauth", "scopes", "client-id", "client-secret"];

/// Top-level nodes a remote server refuses: they configure a process, and
/// a remote server has none.
pub(super) const NOT_FOR_REMOTE: &[&str] = &[
    "args",
    "env",
    "env-file",
    "working-dir",
    "on-demand",
    "stop",
    "sandbox",
    "package",
];

const URL_EXAMPLE: &str = "url \"https://mcp.example.com/mcp\"";

/// Headers xy sets itself, per request, or that would break the exchange.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
];

/// A loopback host, where plain `http://` is allowed (nothing leaves the
/// machine).
fn is_loopback(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "[::1]" | "::1" | "localhost")
}

/// `url "…"`: an `https://` URL, or `http://` to a loopback host.
pub(super) fn parse_url(cx: &mut Cx<'_>, node: &KdlNode) -> Option<(String, SourceSpan)> {
    let e = cx.single(node, URL_EXAMPLE)?;
    let s = cx.string(node, e, URL_EXAMPLE)?;
    let bad = |cx: &mut Cx<'_>, message: String, label: &str, help: &str| {
        let d = cx
            .diag(DiagnosticKind::InvalidValue, e.span(), message)
            .with_label(label.to_owned())
            .with_help(help.to_owned());
        cx.push(d);
    };
    let parsed = match url::Url::parse(&s) {
        Ok(u) => u,
        Err(err) => {
            bad(
                cx,
                format!("`url` {s:?} is not a URL: {err}"),
                "not a URL",
                &format!("e.g. {URL_EXAMPLE}"),
            );
            return None;
        }
    };
    let host = parsed.host_str().unwrap_or("").to_owned();
    match parsed.scheme() {
        "https" if !host.is_empty() => {}
        "http" if is_loopback(&host) => {}
        "http" => {
            bad(
                cx,
                format!(
                    "`url` {s:?} is plain http:// to {host}: only loopback hosts (127.0.0.1, \
                     ::1, localhost) may be reached without TLS"
                ),
                "not https",
                "use https://, or a loopback host for a server on this machine",
            );
            return None;
        }
        other => {
            bad(
                cx,
                format!("`url` must be https:// (or http:// to a loopback host), found {other}://"),
                "not an http(s) URL",
                &format!("e.g. {URL_EXAMPLE}"),
            );
            return None;
        }
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        bad(
            cx,
            "`url` must not carry a user name or password: a config file is not a secret store"
                .to_owned(),
            "credentials in the URL",
            "remove them and use headers { Authorization secret=\"NAME\" } with a secrets { } entry",
        );
        return None;
    }
    if parsed.fragment().is_some() {
        bad(
            cx,
            format!("`url` {s:?} has a #fragment, which is never sent to a server"),
            "fragment",
            "remove the part from `#`",
        );
        return None;
    }
    Some((s, e.span()))
}

/// One parsed header and where its `secret=` value is written (checked
/// against `secrets { }` once the whole file is read).
pub(super) struct Header {
    pub(super) spec: HeaderSpec,
    pub(super) secret_at: Option<SourceSpan>,
}

/// `headers { Name "literal" }` / `headers { Name secret="NAME" }`.
pub(super) fn parse_headers(cx: &mut Cx<'_>, node: &KdlNode) -> Vec<Header> {
    let mut out = Vec::new();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let name = child.name().value();
        let example = format!("{name} secret=\"TOKEN\"");
        if !is_token(name) {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    child.name().span(),
                    format!("invalid header name {name:?}"),
                )
                .with_label("not a header name")
                .with_help("a header name is letters, digits and !#$%&'*+-.^_`|~");
            cx.push(d);
            continue;
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    child.name().span(),
                    format!("header {name} is set by xy itself for each request"),
                )
                .with_label("reserved")
                .with_help("remove it; headers { } is for credentials and API keys");
            cx.push(d);
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        cx.no_children(child);
        let entries = child.entries();
        let value = match entries {
            [one] if one.name().is_none() => match one.value() {
                KdlValue::String(v) if is_header_value(v) => {
                    Some((HeaderValueSpec::Literal(v.clone()), None))
                }
                KdlValue::String(_) => {
                    let d = cx
                        .diag(
                            DiagnosticKind::InvalidValue,
                            one.span(),
                            format!("header {name}'s value holds a control character"),
                        )
                        .with_label("not a header value")
                        .with_help("a header value is one line of visible text");
                    cx.push(d);
                    None
                }
                _ => {
                    cx.wrong_type(child, one, "a string", format!("e.g. {example}"));
                    None
                }
            },
            [one] if one.name().is_some_and(|n| n.value() == "secret") => match one.value() {
                KdlValue::String(v) if !v.is_empty() => {
                    Some((HeaderValueSpec::Secret(v.clone()), Some(one.span())))
                }
                _ => {
                    cx.wrong_type(child, one, "a secret's name", format!("e.g. {example}"));
                    None
                }
            },
            _ => {
                let span = entries.first().map_or(child.name().span(), |e| e.span());
                let d = cx
                    .diag(
                        DiagnosticKind::WrongType,
                        span,
                        format!("header {name} takes one value: a string, or secret=\"NAME\""),
                    )
                    .with_label("not one value")
                    .with_help(format!("e.g. {name} \"value\" or {example}"));
                cx.push(d);
                None
            }
        };
        if let Some((value, secret_at)) = value {
            out.push(Header {
                spec: HeaderSpec {
                    name: name.to_owned(),
                    value,
                },
                secret_at,
            });
        }
    }
    out
}

/// A parsed `auth { }` and its `client-secret secret="NAME"` with where
/// the name is written (checked against `secrets { }`, and its spec filled
/// in, once the whole file is read).
pub(super) struct Auth {
    pub(super) cfg: OAuthConfig,
    pub(super) secret: Option<(String, SourceSpan)>,
}

/// `auth { oauth; scopes "a" "b"; client-id "…"; client-secret secret="NAME" }`.
pub(super) fn parse_auth(cx: &mut Cx<'_>, node: &KdlNode) -> Option<Auth> {
    let mut auth = OAuthConfig::default();
    let mut secret: Option<(String, SourceSpan)> = None;
    let mut oauth = false;
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !AUTH_FIELDS.contains(&key) {
            cx.unknown_node(child, AUTH_FIELDS, "in `auth { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        match key {
            "oauth" => {
                cx.no_props(child);
                cx.no_children(child);
                if let Some(e) = child.entries().iter().find(|e| e.name().is_none()) {
                    let d = cx
                        .diag(
                            DiagnosticKind::WrongType,
                            e.span(),
                            "`oauth` takes no value",
                        )
                        .with_label("unexpected value")
                        .with_help("write just: oauth");
                    cx.push(d);
                }
                oauth = true;
            }
            "scopes" => {
                cx.no_props(child);
                cx.no_children(child);
                for e in child.entries().iter().filter(|e| e.name().is_none()) {
                    if let Some(s) = cx.string(child, e, "scopes \"repo\" \"read:org\"") {
                        auth.scopes.push(s);
                    }
                }
            }
            "client-id" => {
                let example = "client-id \"my-registered-client\"";
                if let Some(e) = cx.single(child, example)
                    && let Some(s) = cx.string(child, e, example)
                {
                    auth.client_id = Some(s);
                }
            }
            "client-secret" => {
                let example = "client-secret secret=\"CLIENT_SECRET\"";
                cx.no_children(child);
                match child.entries() {
                    [one] if one.name().is_some_and(|n| n.value() == "secret") => {
                        match one.value() {
                            KdlValue::String(v) if !v.is_empty() => {
                                secret = Some((v.clone(), one.span()));
                            }
                            _ => cx.wrong_type(
                                child,
                                one,
                                "a secret's name",
                                format!("e.g. {example}"),
                            ),
                        }
                    }
                    entries => {
                        let span = entries.first().map_or(child.name().span(), |e| e.span());
                        let d = cx
                            .diag(
                                DiagnosticKind::WrongType,
                                span,
                                "`client-secret` takes secret=\"NAME\": a client secret is never written in the file",
                            )
                            .with_label("not secret=\"NAME\"")
                            .with_help(format!(
                                "e.g. {example}, with secrets {{ CLIENT_SECRET file=\"~/.config/xy/CLIENT_SECRET\" }}"
                            ));
                        cx.push(d);
                    }
                }
            }
            _ => unreachable!("every AUTH_FIELDS entry is matched"),
        }
    }
    if !oauth {
        let d = cx
            .diag(
                DiagnosticKind::MissingField,
                node.name().span(),
                "`auth` needs `oauth` (the only kind of authorization xy does)",
            )
            .with_label("no kind")
            .with_help("write: auth { oauth }; for a fixed token use headers { Authorization secret=\"NAME\" }");
        cx.push(d);
        return None;
    }
    if let Some((_, span)) = &secret
        && auth.client_id.is_none()
    {
        let d = cx
            .diag(
                DiagnosticKind::MissingField,
                *span,
                "`client-secret` needs `client-id`: a secret belongs to a pre-registered client",
            )
            .with_label("no client-id")
            .with_help("add client-id \"…\" (the id the provider registered for xy), or remove client-secret");
        cx.push(d);
        return None;
    }
    Some(Auth { cfg: auth, secret })
}

/// RFC 9110 `token`.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_header_value(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}
