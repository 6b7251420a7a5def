//! Codex's `config.toml`, read through `toml_edit` (the document `xy-cli`
//! edits).

use std::collections::BTreeMap;

use toml_edit::{DocumentMut, Item, TableLike};

use super::{ClientError, Entry, spec_of};

/// The file's document.
pub fn parse(text: &str) -> Result<DocumentMut, ClientError> {
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

/// The `[mcp_servers.<name>]` entries.
pub fn entries(text: &str) -> Result<Vec<Entry>, ClientError> {
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
