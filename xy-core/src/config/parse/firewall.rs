//! `firewall { mode "pin" }` (SPEC §20): how this server's tools are let
//! through. Same diagnostics as every other block: unknown children,
//! duplicates, wrong types and unknown modes name file, line and column.

use kdl::KdlNode;

use super::cx::Cx;
use crate::firewall::FirewallMode;
use crate::protocol::DiagnosticKind;

/// Children of `firewall { … }`.
pub(super) const FIREWALL_FIELDS: &[&str] = &["mode"];
/// The modes, for suggestions.
const MODES: &[&str] = &["pin", "review", "off"];

/// Parses the block (a server file's, or `xy.kdl`'s daemon-wide default);
/// `None` when it sets no (valid) mode, so the default applies.
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
                    let help = match super::cx::suggest(&word, MODES) {
                        Some(s) => format!("did you mean \"{s}\"?"),
                        None => "use \"pin\" (approve what the server lists first, hold \
                                 what changes), \"review\" (hold every tool until approved) \
                                 or \"off\""
                            .to_owned(),
                    };
                    let d = cx
                        .diag(
                            DiagnosticKind::InvalidValue,
                            e.span(),
                            format!("unknown firewall mode {word:?}"),
                        )
                        .with_label("not a mode")
                        .with_help(help);
                    cx.push(d);
                }
            }
        }
    }
    mode
}
