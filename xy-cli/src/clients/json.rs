//! JSON and VS Code's JSONC client files, edited through `jsonc-parser`'s
//! concrete syntax tree: comments, whitespace, key order and trailing
//! commas of everything not rewritten stay byte for byte.

use std::collections::BTreeMap;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value as Json;

use super::{ClientError, Entry, TRANSPORT_KEYS, Value, spec_of};

fn parse(text: &str) -> Result<CstRootNode, ClientError> {
    CstRootNode::parse(text, &ParseOptions::default())
        .map_err(|e| ClientError::Parse(format!("not valid JSON: {e}")))
}

/// The object at the root, `None` for an empty document.
fn root_object(root: &CstRootNode) -> Result<Option<CstObject>, ClientError> {
    match root.value() {
        None => Ok(None),
        Some(v) => v
            .as_object()
            .map(Some)
            .ok_or_else(|| ClientError::Shape("the file's top level is not an object".into())),
    }
}

pub(super) fn entries(text: &str, key: &str) -> Result<Vec<Entry>, ClientError> {
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

fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Str(s) => CstInputValue::String(s.clone()),
        Value::List(l) => {
            CstInputValue::Array(l.iter().map(|s| CstInputValue::String(s.clone())).collect())
        }
    }
}

pub(super) fn apply(
    text: &str,
    key: &str,
    changes: &[(String, Vec<(&'static str, Value)>)],
) -> Result<String, ClientError> {
    let root = parse(text)?;
    let obj = match root_object(&root)? {
        Some(obj) => obj,
        None => root.object_value_or_set(),
    };
    // A missing servers object (or entry) is created: `--with-xy` adds one.
    let servers = obj
        .object_value_or_create(key)
        .ok_or_else(|| ClientError::Shape(format!("`{key}` is not an object")))?;
    for (name, fields) in changes {
        // No fields: the entry goes (`clients apply --one`).
        if fields.is_empty() {
            if let Some(prop) = servers.get(name) {
                prop.remove();
            }
            continue;
        }
        let Some(prop) = servers.get(name) else {
            servers.append(
                name,
                CstInputValue::Object(
                    fields
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), input(v)))
                        .collect(),
                ),
            );
            continue;
        };
        let entry = prop
            .object_value()
            .ok_or_else(|| ClientError::Shape(format!("entry `{name}` is not an object")))?;
        let keep: Vec<_> = entry
            .properties()
            .into_iter()
            .filter(|p| {
                p.decoded_name()
                    .is_some_and(|n| !TRANSPORT_KEYS.contains(&n.as_str()))
            })
            .collect();
        if keep.is_empty() {
            // Nothing of the user's own in the entry: replace it whole, which
            // lays the new keys out in the file's indentation.
            prop.set_value(CstInputValue::Object(
                fields
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), input(v)))
                    .collect(),
            ));
            continue;
        }
        for p in entry.properties() {
            if p.decoded_name()
                .is_some_and(|n| TRANSPORT_KEYS.contains(&n.as_str()))
            {
                p.remove();
            }
        }
        for (i, (k, v)) in fields.iter().enumerate() {
            entry.insert(i, k, input(v));
        }
    }
    Ok(root.to_string())
}
