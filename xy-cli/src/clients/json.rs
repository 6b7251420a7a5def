//! JSON and VS Code's JSONC client files, edited through `jsonc-parser`'s
//! concrete syntax tree: comments, whitespace, key order and trailing
//! commas of everything not rewritten stay byte for byte.

use jsonc_parser::cst::CstInputValue;
use xy_core::clients::json::{parse, root_object};

use super::{ClientError, TRANSPORT_KEYS, Value};

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
