//! Codex's `config.toml`, edited through `toml_edit`: only the rewritten
//! `[mcp_servers.<name>]` tables change; every other table, key, comment
//! and blank line is written back as it was.

use std::collections::BTreeMap;

use toml_edit::{Array, DocumentMut, Item, TableLike};

use super::{ClientError, Entry, TRANSPORT_KEYS, Value, spec_of};

fn parse(text: &str) -> Result<DocumentMut, ClientError> {
    text.parse::<DocumentMut>()
        .map_err(|e| ClientError::Parse(format!("not valid TOML: {e}")))
}

fn servers(doc: &DocumentMut) -> Result<Option<&dyn TableLike>, ClientError> {
    match doc.get("mcp_servers") {
        None => Ok(None),
        Some(item) => item
            .as_table_like()
            .map(Some)
            .ok_or_else(|| ClientError::Shape("`mcp_servers` is not a table".into())),
    }
}

pub(super) fn entries(text: &str) -> Result<Vec<Entry>, ClientError> {
    let doc = parse(text)?;
    let Some(servers) = servers(&doc)? else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .map(|(name, item)| Entry {
            name: name.to_owned(),
            spec: item
                .as_table_like()
                .map_or(super::Spec::Other, spec_from_table),
            // Codex spells a URL entry's headers `http_headers`.
            headers: item
                .as_table_like()
                .and_then(|t| t.get("http_headers"))
                .and_then(Item::as_table_like)
                .map(|h| {
                    h.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.to_owned(), v.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect())
}

fn spec_from_table(t: &dyn TableLike) -> super::Spec {
    let s = |k: &str| t.get(k).and_then(Item::as_str).map(str::to_owned);
    let args = t
        .get("args")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let env: BTreeMap<String, String> = t
        .get("env")
        .and_then(Item::as_table_like)
        .map(|e| {
            e.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.to_owned(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    spec_of(s("command"), args, env, s("cwd"), s("url"))
}

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
