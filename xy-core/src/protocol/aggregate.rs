//! The aggregate endpoint's rules that are data (SPEC §26): how a server's
//! tool gets its name at `/mcp` (prefixed, at most 64 characters of
//! `[A-Za-z0-9_-]`, collisions resolved deterministically, D241), which
//! tools are app-only and never reach a model-facing list (SPEC §27), and
//! what `tools_search` carries (`xyctl tools search`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Longest name the big model APIs take for a tool.
pub const MAX_NAME: usize = 64;
/// Between the server's part and the tool's.
pub const SEPARATOR: &str = "__";
/// Results `find_tools` returns without a `limit`.
pub const FIND_DEFAULT_LIMIT: u32 = 8;
/// Results `find_tools` returns at most.
pub const FIND_MAX_LIMIT: u32 = 50;

/// `name` with every character outside `[A-Za-z0-9_-]` made `_`.
fn sanitise(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The first `hex` hex digits of SHA-256 of `server NUL item`.
fn short_hash(server: &str, item: &str, hex: usize) -> String {
    let mut h = Sha256::new();
    h.update(server.as_bytes());
    h.update([0]);
    h.update(item.as_bytes());
    let d = h.finalize();
    let mut s = String::with_capacity(hex);
    for b in d.iter() {
        s.push_str(&format!("{b:02x}"));
        if s.len() >= hex {
            break;
        }
    }
    s.truncate(hex);
    s
}

/// `stem` cut to leave room for `_<hash>` within [`MAX_NAME`].
fn hashed(stem: &str, server: &str, item: &str, hex: usize) -> String {
    let keep = MAX_NAME - 1 - hex;
    let mut s: String = stem.chars().take(keep).collect();
    s.push('_');
    s.push_str(&short_hash(server, item, hex));
    s
}

/// The aggregate's names of `(server, item)` pairs (tools, or prompts):
///
/// 1. `<server>__<item>` when both are already `[A-Za-z0-9_-]` and the
///    whole is at most 64 characters;
/// 2. otherwise the sanitised form (each other character made `_`) cut to
///    55 characters, then `_` and the first 8 hex digits of SHA-256 of
///    `server NUL item`;
/// 3. should two pairs still get one name, each of them takes 16 hex
///    digits instead (cut to 47 characters).
///
/// A name depends only on its own pair (and, for 3, on the other pair it
/// met), never on listing order.
pub fn prefixed_names<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<(String, String), String> {
    let mut out: BTreeMap<(String, String), String> = BTreeMap::new();
    for (server, item) in pairs {
        let plain = format!("{server}{SEPARATOR}{item}");
        let clean = sanitise(&plain);
        let name = if clean == plain && plain.len() <= MAX_NAME {
            plain
        } else {
            hashed(&clean, server, item, 8)
        };
        out.insert((server.to_owned(), item.to_owned()), name);
    }
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for n in out.values() {
        *count.entry(n.as_str()).or_default() += 1;
    }
    let clash: BTreeSet<String> = count
        .into_iter()
        .filter(|(_, c)| *c > 1)
        .map(|(n, _)| n.to_owned())
        .collect();
    if !clash.is_empty() {
        for ((server, item), name) in &mut out {
            if clash.contains(name) {
                let clean = sanitise(&format!("{server}{SEPARATOR}{item}"));
                *name = hashed(&clean, server, item, 16);
            }
        }
    }
    out
}

/// Params of `tools_search`: what `find_tools` is asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSearchParams {
    /// The words to rank by.
    pub query: String,
    /// Only this server's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// At most this many ([`FIND_DEFAULT_LIMIT`] if absent, at most
    /// [`FIND_MAX_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Rank what this profile's endpoint offers (absent: `/mcp`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl ToolsSearchParams {
    /// The number of results asked for, bounded.
    pub fn limit(&self) -> usize {
        self.limit
            .unwrap_or(FIND_DEFAULT_LIMIT)
            .clamp(1, FIND_MAX_LIMIT) as usize
    }
}

/// One ranked tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolHit {
    /// The aggregate's name (what `call_tool` takes).
    pub name: String,
    /// The server that offers it.
    pub server: String,
    /// Its name at the server.
    pub tool: String,
    /// The ranking's score (higher first; only comparable within one answer).
    pub score: f64,
    /// The full definition as the aggregate lists it (its `name` the
    /// aggregate's).
    pub definition: Value,
}

/// Result of `tools_search`: what `find_tools` answers, best first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsSearchResult {
    /// Ranked tools.
    pub tools: Vec<ToolHit>,
    /// Servers whose listing could not be had (each with why): their tools
    /// are missing from the ranking.
    #[serde(default)]
    pub unavailable: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(server: &str, tool: &str) -> String {
        prefixed_names([(server, tool)])
            .into_values()
            .next()
            .unwrap()
    }

    fn ok(n: &str) -> bool {
        n.len() <= MAX_NAME
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_stay_readable_and_others_get_a_hash() {
        assert_eq!(one("fs", "read_file"), "fs__read_file");
        let dotted = one("my.server", "read");
        assert!(dotted.starts_with("my_server__read_"), "{dotted}");
        assert_eq!(dotted.len(), "my_server__read_".len() + 8);
        let long = one("srv", &"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME);
        assert!(ok(&long) && ok(&dotted));
        assert_eq!(one("srv", &"x".repeat(100)), long, "deterministic");
        let emoji = one("s", "résumé/😀");
        assert!(ok(&emoji), "{emoji}");
    }

    #[test]
    fn collisions_are_resolved_whatever_the_order() {
        let a = "a".repeat(40);
        let t1 = format!("{}1", "t".repeat(40));
        let t2 = format!("{}2", "t".repeat(40));
        let n = prefixed_names([(a.as_str(), t1.as_str()), (a.as_str(), t2.as_str())]);
        let m = prefixed_names([(a.as_str(), t2.as_str()), (a.as_str(), t1.as_str())]);
        assert_eq!(n, m);
        let names: BTreeSet<_> = n.values().collect();
        assert_eq!(names.len(), 2);
        assert!(n.values().all(|v| ok(v)));
        // `a.b`/`x` and `a_b`/`x`: sanitised alike, told apart.
        let n = prefixed_names([("a.b", "x"), ("a_b", "x")]);
        let names: BTreeSet<_> = n.values().collect();
        assert_eq!(names.len(), 2, "{n:?}");
        assert_eq!(n[&("a_b".into(), "x".into())], "a_b__x");
    }
}
