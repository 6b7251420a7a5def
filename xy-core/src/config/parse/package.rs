//! `package "npm:<pkg>@<ver>"` / `"pypi:<pkg>==<ver>"` (SPEC §22): the
//! pinned install a server runs. One string, an exact version; a mistake
//! names file, line and column like every other node.

use kdl::KdlNode;

use super::cx::Cx;
use crate::package::PackageRef;
use crate::protocol::DiagnosticKind;

const EXAMPLE: &str = "package \"npm:@modelcontextprotocol/server-memory@2026.8.31\"";

/// Parses the node; `None` after a diagnostic.
pub(super) fn parse_package(cx: &mut Cx<'_>, node: &KdlNode) -> Option<PackageRef> {
    let e = cx.single(node, EXAMPLE)?;
    let s = cx.string(node, e, EXAMPLE)?;
    match s.parse::<PackageRef>() {
        Ok(p) => Some(p),
        Err(err) => {
            let d = cx
                .diag(DiagnosticKind::InvalidValue, e.span(), err.to_string())
                .with_label("not a pinned package")
                .with_help(format!(
                    "e.g. {EXAMPLE} or package \"pypi:mcp-server-time==2025.9.25\"; \
                     `xyctl add --npm`/`--pypi` writes it"
                ));
            cx.push(d);
            None
        }
    }
}
