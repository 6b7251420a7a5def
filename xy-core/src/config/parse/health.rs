//! `health { }` (SPEC §3): exactly one probe (`mcp`, `http` or `tcp`) and
//! its timings.

use kdl::{KdlEntry, KdlNode, KdlValue};
use miette::SourceSpan;

use super::cx::Cx;
use crate::config::{HealthConfig, ProbeKind};
use crate::protocol::DiagnosticKind;

/// The probe kinds inside `health { … }` (exactly one).
const PROBE_KINDS: &[&str] = &["mcp", "http", "tcp"];
/// Children of `health { … }`.
pub(super) const HEALTH_FIELDS: &[&str] = &[
    "mcp",
    "http",
    "tcp",
    "interval",
    "timeout",
    "failures",
    "start-period",
    "restart-on-failure",
];

pub(super) fn parse_health(cx: &mut Cx<'_>, node: &KdlNode) -> Option<HealthConfig> {
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
