//! Codex's `config.toml`, edited through `toml_edit`: only the rewritten
//! `[mcp_servers.<name>]` tables change; every other table, key, comment
//! and blank line is written back as it was.

use toml_edit::{Array, Item};
use xy_core::clients::toml::parse;

use super::{ClientError, TRANSPORT_KEYS, Value};

pub(super) fn apply(
    text: &str,
    changes: &[(String, Vec<(&'static str, Value)>)],
) -> Result<String, ClientError> {
    let mut doc = parse(text)?;
    // A missing `[mcp_servers]` (or entry) is created: `--with-xy` adds one.
    if doc.get("mcp_servers").is_none() {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        doc.insert("mcp_servers", Item::Table(t));
    }
    let servers = doc
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| ClientError::Shape("`mcp_servers` is not a table".into()))?;
    for (name, fields) in changes {
        // No fields: the entry goes (`clients apply --one`).
        if fields.is_empty() {
            servers.remove(name);
            continue;
        }
        if servers.get(name).is_none() {
            servers.insert(name, Item::Table(toml_edit::Table::new()));
        }
        let entry = servers
            .get_mut(name)
            .and_then(Item::as_table_like_mut)
            .ok_or_else(|| ClientError::Shape(format!("`[mcp_servers.{name}]` is not a table")))?;
        for k in TRANSPORT_KEYS {
            entry.remove(k);
        }
        for (k, v) in fields {
            let item = match v {
                Value::Str(s) => toml_edit::value(s.as_str()),
                Value::List(l) => toml_edit::value(l.iter().map(String::as_str).collect::<Array>()),
            };
            entry.insert(k, item);
        }
    }
    Ok(doc.to_string())
}
