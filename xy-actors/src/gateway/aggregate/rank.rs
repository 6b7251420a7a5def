//! The ranking behind `find_tools` and `tools_search` (SPEC §26), over
//! the aggregate's visible tools: each tool a document of its name (split
//! at `_`, `-`, `.`, `/` and camelCase), title, description, parameter
//! names and descriptions, and its server's name and instructions; BM25
//! (k1 1.2, b 0.75, the textbook values, D245) over lowercase ASCII-folded
//! words. No weight, word list or rule is tuned to any corpus.

use std::collections::HashMap;

use serde_json::Value;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// One tool to rank: its words.
pub(crate) struct Doc {
    terms: HashMap<String, u32>,
    len: u32,
}

/// The words of `text`: runs of letters and digits, lowercased, camelCase
/// split (`readFile` → `read`, `file`).
pub(crate) fn words(text: &str, out: &mut Vec<String>) {
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
}

impl Doc {
    /// The document of `tool` (its definition as its server lists it).
    pub(crate) fn of(server: &str, instructions: Option<&str>, tool: &Value) -> Doc {
        let mut w = Vec::new();
        let text = |k: &str| tool.get(k).and_then(Value::as_str).unwrap_or("");
        words(text("name"), &mut w);
        words(text("title"), &mut w);
        words(text("description"), &mut w);
        if let Some(props) = tool
            .pointer("/inputSchema/properties")
            .and_then(Value::as_object)
        {
            for (p, schema) in props {
                words(p, &mut w);
                if let Some(d) = schema.get("description").and_then(Value::as_str) {
                    words(d, &mut w);
                }
            }
        }
        words(server, &mut w);
        if let Some(i) = instructions {
            words(i, &mut w);
        }
        let mut terms: HashMap<String, u32> = HashMap::new();
        for t in &w {
            *terms.entry(t.clone()).or_default() += 1;
        }
        Doc {
            terms,
            len: u32::try_from(w.len()).unwrap_or(u32::MAX),
        }
    }
}

/// `docs` scored against `query`, best first: `(index, score)` of those
/// that match at all. Ties keep the documents' order.
pub(crate) fn rank(docs: &[Doc], query: &str) -> Vec<(usize, f64)> {
    let mut q = Vec::new();
    words(query, &mut q);
    q.sort();
    q.dedup();
    if docs.is_empty() || q.is_empty() {
        return Vec::new();
    }
    let n = docs.len() as f64;
    let avg = docs.iter().map(|d| f64::from(d.len)).sum::<f64>() / n;
    let avg = if avg > 0.0 { avg } else { 1.0 };
    let idf: Vec<f64> = q
        .iter()
        .map(|t| {
            let df = docs.iter().filter(|d| d.terms.contains_key(t)).count() as f64;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let norm = K1 * (1.0 - B + B * f64::from(d.len) / avg);
            let s: f64 = q
                .iter()
                .zip(&idf)
                .filter_map(|(t, idf)| {
                    let tf = f64::from(*d.terms.get(t)?);
                    Some(idf * tf * (K1 + 1.0) / (tf + norm))
                })
                .sum();
            (s > 0.0).then_some((i, s))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn words_split_as_people_write_names() {
        let mut w = Vec::new();
        words("readFile git_log-entry HTTPServer v2", &mut w);
        assert_eq!(
            w,
            ["read", "file", "git", "log", "entry", "httpserver", "v2"]
        );
    }

    #[test]
    fn the_tool_that_says_it_ranks_first() {
        let docs = [
            Doc::of(
                "fs",
                None,
                &json!({"name": "read_file", "description": "Read a file from disk"}),
            ),
            Doc::of(
                "git",
                Some("Git repositories"),
                &json!({"name": "log", "description": "Show commit history",
                    "inputSchema": {"properties": {"repo": {"description": "path"}}}}),
            ),
        ];
        let r = rank(&docs, "git commit history");
        assert_eq!(r[0].0, 1);
        assert_eq!(r.len(), 1);
        assert_eq!(rank(&docs, "read a file")[0].0, 0);
        assert!(rank(&docs, "").is_empty());
    }
}
