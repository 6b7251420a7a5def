//! `agent { allow-restart #true }` (SPEC §17): what an AI agent may do to
//! this server through `xyctl mcp`. Same diagnostics as every other block:
//! unknown children, duplicates and wrong types name file, line and column.

use kdl::{KdlNode, KdlValue};

use super::cx::Cx;
use crate::config::AgentConfig;

/// Children of `agent { … }`.
pub(super) const AGENT_FIELDS: &[&str] = &["allow-restart"];

/// Parses the block; settings with an error keep their default (off).
pub(super) fn parse_agent(cx: &mut Cx<'_>, node: &KdlNode) -> AgentConfig {
    let mut agent = AgentConfig::default();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for child in cx.block(node) {
        let key = child.name().value();
        if !AGENT_FIELDS.contains(&key) {
            cx.unknown_node(child, AGENT_FIELDS, "in `agent { }`");
            continue;
        }
        if cx.duplicate(child, &mut seen) {
            continue;
        }
        let example = "allow-restart #true";
        if let Some(e) = cx.single(child, example) {
            match e.value() {
                KdlValue::Bool(b) => agent.allow_restart = *b,
                _ => cx.wrong_type(
                    child,
                    e,
                    "a boolean",
                    "write #true or #false (KDL v1 files: true or false)".to_owned(),
                ),
            }
        }
    }
    agent
}
