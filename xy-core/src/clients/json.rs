//! JSON and VS Code's JSONC client files, read through `jsonc-parser`'s
//! concrete syntax tree (the tree `xy-cli` edits, so both read a file the
//! same way).

use std::collections::BTreeMap;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstObject, CstRootNode};
use serde_json::Value as Json;

use super::{ClientError, Entry, spec_of};

/// The file's syntax tree.
pub fn parse(text: &str) -> Result<CstRootNode, ClientError> {
    CstRootNode::parse(text, &ParseOptions::default())
        .map_err(|e| ClientError::Parse(format!("not valid JSON: {e}")))
}

/// The object at the root, `None` for an empty document.
pub fn root_object(root: &CstRootNode) -> Result<Option<CstObject>, ClientError> {
    match root.value() {
        None => Ok(None),
        Some(v) => v
            .as_object()
            .map(Some)
            .ok_or_else(|| ClientError::Shape("the file's top level is not an object".into())),
    }
}

/// The entries under `key`.
pub fn entries(text: &str, key: &str) -> Result<Vec<Entry>, ClientError> {
    let root = parse(text)?;
    let Some(obj) = root_object(&root)? else {
        return Ok(Vec::new());
    };
    let Some(servers) = obj.get(key) else {
        return Ok(Vec::new());
    };
    let servers = servers
        .value()
        .and_then(|v| v.to_serde_value())
        .unwrap_or(Json::Null);
    let Json::Object(map) = servers else {
        return Err(ClientError::Shape(format!("`{key}` is not an object")));
    };
    Ok(map
        .into_iter()
        .map(|(name, v)| Entry {
            name,
            spec: spec_from_json(&v),
            headers: v
                .get("headers")
                .and_then(Json::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, x)| x.as_str().map(|x| (k.clone(), x.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect())
}

fn spec_from_json(v: &Json) -> super::Spec {
    let s = |k: &str| v.get(k).and_then(Json::as_str).map(str::to_owned);
    let args = v
        .get("args")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let env: BTreeMap<String, String> = v
        .get("env")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, x)| x.as_str().map(|x| (k.clone(), x.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    spec_of(
        s("command"),
        args,
        env,
        s("cwd"),
        s("url").or_else(|| s("serverUrl")),
    )
}
