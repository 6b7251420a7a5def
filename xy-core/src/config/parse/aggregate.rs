//! `aggregate { mode "full" }` and `profile "<name>" { servers "a" "b";
//! mode "search" }` in `xy.kdl` (SPEC §26): what the gateway's `/mcp` and
//! `/p/<name>/mcp` serve. Same diagnostics as every other block.

use kdl::{KdlEntry, KdlNode, KdlValue};

use super::cx::Cx;
use crate::config::settings::{AggregateMode, AggregateSettings, Profile};
use crate::protocol::DiagnosticKind;

/// Children of `aggregate { … }`.
const AGGREGATE_FIELDS: &[&str] = &["mode"];
/// Children of `profile "…" { … }`.
const PROFILE_FIELDS: &[&str] = &["servers", "mode"];
/// The modes, for suggestions.
const MODES: &[&str] = &["full", "search"];

/// `aggregate { mode … }`: the default `/mcp`'s mode, if set (validly).
pub(super) fn parse_aggregate(cx: &mut Cx<'_>, node: &KdlNode) -> Option<AggregateMode> {
    let mut mode = None;
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !AGGREGATE_FIELDS.contains(&key) {
            cx.unknown_node(child, AGGREGATE_FIELDS, "in `aggregate { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        mode = parse_mode(cx, child).or(mode);
    }
    mode
}

/// `mode "full"|"search"`.
fn parse_mode(cx: &mut Cx<'_>, child: &KdlNode) -> Option<AggregateMode> {
    let example = "mode \"search\"";
    let e = cx.single(child, example)?;
    let word = cx.string(child, e, example)?;
    match AggregateMode::parse(&word) {
        Some(m) => Some(m),
        None => {
            let help = match super::cx::suggest(&word, MODES) {
                Some(s) => format!("did you mean \"{s}\"?"),
                None => "use \"full\" (every tool of every server) or \"search\" \
                         (only find_tools and call_tool)"
                    .to_owned(),
            };
            let d = cx
                .diag(
                    DiagnosticKind::InvalidValue,
                    e.span(),
                    format!("unknown aggregate mode {word:?}"),
                )
                .with_label("not a mode")
                .with_help(help);
            cx.push(d);
            None
        }
    }
}

/// One `profile "<name>" { … }`, added to `into` (a second profile of the
/// same name is an error).
pub(super) fn parse_profile(cx: &mut Cx<'_>, node: &KdlNode, into: &mut AggregateSettings) {
    const EXAMPLE: &str = "profile \"cursor\" { servers \"fs\" \"git\"; mode \"search\" }";
    cx.no_props(node);
    let args: Vec<&KdlEntry> = node
        .entries()
        .iter()
        .filter(|e| e.name().is_none())
        .collect();
    let name = match args.as_slice() {
        [one] => name_of(cx, node, one, "profile"),
        [] => {
            let d = cx
                .diag(
                    DiagnosticKind::WrongType,
                    node.name().span(),
                    "`profile` needs a name",
                )
                .with_label("no name")
                .with_help(format!("e.g. {EXAMPLE}"));
            cx.push(d);
            None
        }
        [_, extra, ..] => {
            let d = cx
                .diag(
                    DiagnosticKind::WrongType,
                    extra.span(),
                    "`profile` takes exactly one name",
                )
                .with_label("extra value")
                .with_help(format!("e.g. {EXAMPLE}"));
            cx.push(d);
            None
        }
    };
    let mut profile = Profile::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in node.children().map_or(&[][..], |c| c.nodes()) {
        let key = child.name().value();
        if !PROFILE_FIELDS.contains(&key) {
            cx.unknown_node(child, PROFILE_FIELDS, "in `profile { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        match key {
            "mode" => profile.mode = parse_mode(cx, child),
            _ => profile.servers = Some(servers(cx, child)),
        }
    }
    let Some(name) = name else { return };
    if into.profiles.contains_key(&name) {
        let d = cx
            .diag(
                DiagnosticKind::DuplicateNode,
                node.name().span(),
                format!("profile {name:?} is given twice"),
            )
            .with_label("duplicate")
            .with_help("keep one profile of each name");
        cx.push(d);
        return;
    }
    into.profiles.insert(name, profile);
}

/// `servers "a" "b"`: at least one name, each a valid server name.
fn servers(cx: &mut Cx<'_>, node: &KdlNode) -> Vec<String> {
    cx.no_props(node);
    cx.no_children(node);
    let mut out = Vec::new();
    for e in node.entries().iter().filter(|e| e.name().is_none()) {
        if let Some(n) = name_of(cx, node, e, "server")
            && !out.contains(&n)
        {
            out.push(n);
        }
    }
    if out.is_empty() && !node.entries().iter().any(|e| e.name().is_none()) {
        let d = cx
            .diag(
                DiagnosticKind::WrongType,
                node.name().span(),
                "`servers` needs at least one server name",
            )
            .with_label("no value")
            .with_help("e.g. servers \"fs\" \"git\" (leave the line out for every server)");
        cx.push(d);
    }
    out
}

/// A string that is a valid name (`[A-Za-z0-9._-]`, as a server's).
fn name_of(cx: &mut Cx<'_>, node: &KdlNode, e: &KdlEntry, what: &str) -> Option<String> {
    let example = format!("{what} \"cursor\"");
    let KdlValue::String(s) = e.value() else {
        cx.string(node, e, &example);
        return None;
    };
    if crate::config::is_valid_name(s) {
        return Some(s.clone());
    }
    let d = cx
        .diag(
            DiagnosticKind::InvalidValue,
            e.span(),
            format!("{s:?} is not a valid {what} name"),
        )
        .with_label("invalid name")
        .with_help("use letters, digits, '.', '_' and '-' (as in a server's name)");
    cx.push(d);
    None
}
