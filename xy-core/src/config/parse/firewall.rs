//! `firewall { mode "pin" }` (SPEC §20): how this server's tools are let
//! through. Same diagnostics as every other block: unknown children,
//! duplicates, wrong types and unknown modes name file, line and column.

use kdl::KdlNode;

use super::Cx;
use crate::config::diagnostic::DiagnosticKind;
use crate::firewall::FirewallMode;

/// Children of `firewall { … }`.
pub(super) const FIREWALL_FIELDS: &[&str] = &["mode"];

/// Parses the block; `None` when it sets no (valid) mode, so the daemon's
/// default applies.
pub(super) fn parse_firewall(cx: &mut Cx<'_>, node: &KdlNode) -> Option<FirewallMode> {
    let mut mode = None;
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !FIREWALL_FIELDS.contains(&key) {
            cx.unknown_node(child, FIREWALL_FIELDS, "in `firewall { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        let example = "mode \"pin\"";
        if let Some(e) = cx.single(child, example)
            && let Some(word) = cx.string(child, e, example)
        {
            match FirewallMode::parse(&word) {
                Some(m) => mode = Some(m),
                None => {
                    let d = cx
                        .diag(
                            DiagnosticKind::InvalidValue,
                            e.span(),
                            format!("unknown firewall mode {word:?}"),
                        )
                        .with_label("not a mode")
                        .with_help(
                            "use \"pin\" (approve what the server lists first, hold \
                             what changes), \"review\" (hold every tool until approved) \
                             or \"off\"",
                        );
                    cx.push(d);
                }
            }
        }
    }
    mode
}
