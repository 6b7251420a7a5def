//! The firewall's enforcement, transport-free (SPEC §20, §27): a server's
//! [`Verdicts`] (published by its ServerActor, which owns the decisions)
//! filter a `tools/list`, `prompts/list`, `resources/list` or
//! `skills/list` result in place and decide a `tools/call`, `prompts/get`,
//! `resources/read` or `skills/get` by name (a resource's is its URI). The stdio bridge calls these; the
//! gateway's reverse proxy can call the same ones. Also the [`Directory`]
//! of the tools every server lists (names and digests), which shadowing is
//! decided against.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};
use xy_core::firewall::{Foreign, Kind, Policy, ToolState, decide};

/// What the bridge knows of one listed item: how xy's own listing had it
/// and what was decided.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    /// The object as xy listed it, without `_meta` (`None` after a daemon
    /// restart, until the child is listed again: then the name decides).
    pub(crate) object: Option<Arc<Map<String, Value>>>,
    pub(crate) state: ToolState,
    /// The first reason, for the refusal text.
    pub(crate) reason: String,
}

/// One server's verdicts: the policy (for items xy has not listed itself)
/// and the decisions of xy's latest listing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Verdicts {
    pub(crate) server: String,
    pub(crate) policy: Policy,
    pub(crate) tools: HashMap<String, Verdict>,
    pub(crate) prompts: HashMap<String, Verdict>,
    /// Pinned resources (skill files, apps) by URI (SPEC §27).
    pub(crate) resources: HashMap<String, Verdict>,
    /// Each skill's `SKILL.md` URI and its files' URIs: a skill is offered
    /// only when every file of it is.
    pub(crate) skills: HashMap<String, Vec<String>>,
    /// Each item of xy's latest listing as the child wrote it (its JSON
    /// text), and whether clients see it: a client's listing made only of
    /// such visible texts goes on as the child's bytes (D49's fast path),
    /// checked without building a `Value`.
    pub(crate) raw_tools: HashMap<Box<str>, bool>,
    pub(crate) raw_prompts: HashMap<Box<str>, bool>,
    /// The pages of xy's latest listing whose every item clients see, as
    /// the child wrote them, split around their id: a client's answer that
    /// is the same page (another id) is passed on after one comparison.
    pub(crate) pages: Vec<Page>,
    /// What xy answers for the server while no child runs (SPEC §26):
    /// `None` before xy has listed it (or its listing is too large).
    pub(crate) ledger: Option<Arc<super::from_ledger::FromLedger>>,
}

/// One listing page as the child wrote it, without its id.
#[derive(Debug, Clone)]
pub(crate) struct Page {
    pub(crate) kind: Kind,
    /// The bytes before the id.
    pub(crate) before: Box<[u8]>,
    /// The bytes after the id.
    pub(crate) after: Box<[u8]>,
}

/// The items of a listing answer, borrowed from its bytes.
#[derive(serde::Deserialize)]
struct RawAnswer<'a> {
    #[serde(borrow, default)]
    result: Option<RawList<'a>>,
}

#[derive(serde::Deserialize)]
struct RawList<'a> {
    #[serde(borrow, default)]
    tools: Option<Vec<&'a serde_json::value::RawValue>>,
    #[serde(borrow, default)]
    prompts: Option<Vec<&'a serde_json::value::RawValue>>,
}

/// The JSON texts of a listing answer's items (`tools` or `prompts`);
/// `None` when it is not such an answer (an error answer has none: `Some([])`).
pub(crate) fn raw_items(line: &[u8], kind: Kind) -> Option<Vec<&str>> {
    let text = std::str::from_utf8(line).ok()?;
    let a: RawAnswer<'_> = serde_json::from_str(text).ok()?;
    let Some(list) = a.result else {
        return Some(Vec::new());
    };
    let items = match kind {
        Kind::Tool => list.tools,
        Kind::Prompt => list.prompts,
        Kind::Resource => None,
    }?;
    Some(
        items
            .into_iter()
            .map(serde_json::value::RawValue::get)
            .collect(),
    )
}

/// A refusal: the text a client is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldBack(pub(crate) String);

/// The answer a client gets for a call of a held-back item, for xy: a
/// tool result with `isError` (so the model reads why) for a tool, a
/// JSON-RPC error for a prompt. The stdio bridge and the gateway's proxy
/// both answer with it.
pub(crate) fn held_back_answer(kind: Kind, id: &Value, text: &str, era2026: bool) -> Value {
    match kind {
        Kind::Tool => {
            let mut r =
                serde_json::json!({"content": [{"type": "text", "text": text}], "isError": true});
            if era2026 {
                r["resultType"] = serde_json::json!("complete");
            }
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": r})
        }
        Kind::Prompt | Kind::Resource => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32602, "message": text, "data": {"heldBack": true}}}),
    }
}

impl Verdicts {
    /// Whether a listing answer (the child's line) holds only items xy
    /// listed itself, byte for byte, and let through: then it needs no
    /// filtering. Anything else takes the `Value` path ([`Verdicts::filter`]).
    pub(crate) fn passes_as_is(
        &self,
        kind: Kind,
        line: &[u8],
        id_at: &std::ops::Range<usize>,
    ) -> bool {
        if self.policy.mode == xy_core::firewall::FirewallMode::Off {
            return true;
        }
        if kind == Kind::Resource {
            // Read whole, but passed as the child's bytes when nothing in
            // it is held back (SPEC §27: byte for byte).
            return serde_json::from_slice::<Value>(line).is_ok_and(|mut v| {
                v.get_mut("result")
                    .is_none_or(|r| self.filter(Kind::Resource, r) == 0)
            });
        }
        // The common case: a page xy listed, unchanged, all of it visible.
        if let (Some(before), Some(after)) = (line.get(..id_at.start), line.get(id_at.end..))
            && self
                .pages
                .iter()
                .any(|p| p.kind == kind && *p.before == *before && *p.after == *after)
        {
            return true;
        }
        let raw = match kind {
            Kind::Tool => &self.raw_tools,
            Kind::Prompt | Kind::Resource => &self.raw_prompts,
        };
        raw_items(line, kind).is_some_and(|items| items.iter().all(|t| raw.get(*t) == Some(&true)))
    }

    fn of(&self, kind: Kind) -> &HashMap<String, Verdict> {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
            Kind::Resource => &self.resources,
        }
    }

    /// Whether clients see this listed item. An item as xy listed it is
    /// decided by its verdict (an equality test, no digest); anything else
    /// (a child that changed without saying so, an item xy has not listed)
    /// is decided afresh by the same pure function.
    pub(crate) fn visible(&self, kind: Kind, item: &Value) -> bool {
        if self.policy.mode == xy_core::firewall::FirewallMode::Off {
            return true;
        }
        let Some(map) = item.as_object() else {
            return false;
        };
        let name = map.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(v) = self.of(kind).get(name)
            && v.object.as_deref().is_some_and(|o| same_but_meta(map, o))
        {
            return v.state.visible();
        }
        decide(&self.policy, kind, item).state.visible()
    }

    /// Whether `item` is in xy's latest listing as it is (`_meta` aside):
    /// one that is not tells that the child changed since xy listed it.
    pub(crate) fn knows(&self, kind: Kind, item: &Value) -> bool {
        let Some(map) = item.as_object() else {
            return false;
        };
        if kind == Kind::Resource {
            // By URI: a resource's pinned object is xy's, not the entry's.
            let uri = map.get("uri").and_then(Value::as_str).unwrap_or("");
            return !xy_core::firewall::pins_uri(uri) || self.resources.contains_key(uri);
        }
        let name = map.get("name").and_then(Value::as_str).unwrap_or("");
        self.of(kind)
            .get(name)
            .is_some_and(|v| v.object.as_deref().is_some_and(|o| same_but_meta(map, o)))
    }

    /// Whether xy's latest listing has an item named `name`.
    pub(crate) fn knows_name(&self, kind: Kind, name: &str) -> bool {
        self.of(kind).contains_key(name)
    }

    /// Removes the held-back items from a `tools/list` (`prompts/list`)
    /// result; returns how many went. Other fields (`nextCursor`) stay.
    pub(crate) fn filter(&self, kind: Kind, result: &mut Value) -> usize {
        let key = match kind {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => return self.filter_resources(result),
        };
        let Some(items) = result.get_mut(key).and_then(Value::as_array_mut) else {
            return 0;
        };
        let before = items.len();
        items.retain(|item| self.visible(kind, item));
        before - items.len()
    }

    /// Whether clients see a listed item as xy listed it (answers from the
    /// ledger, SPEC §26): a tool or prompt by its verdict (everything when
    /// off), a resource as a `resources/read` of its URI is decided.
    pub(crate) fn shows(&self, kind: Kind, name: &str) -> bool {
        let table = match kind {
            Kind::Resource => return self.call(kind, name).is_ok(),
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
        };
        self.policy.mode == xy_core::firewall::FirewallMode::Off
            || table.get(name).is_some_and(|v| v.state.visible())
    }

    /// Removes the held-back pinned resources from a `resources/list`
    /// result, the held-back templates from a `resources/templates/list`
    /// result, and from a `skills/list` result the skills any file of which
    /// is held back; returns how many went.
    fn filter_resources(&self, result: &mut Value) -> usize {
        let uri_of = |item: &Value| {
            item.get("uri")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let mut gone = 0;
        if let Some(items) = result.get_mut("resources").and_then(Value::as_array_mut) {
            let before = items.len();
            items.retain(|i| self.call(Kind::Resource, &uri_of(i)).is_ok());
            gone += before - items.len();
        }
        if let Some(items) = result
            .get_mut("resourceTemplates")
            .and_then(Value::as_array_mut)
        {
            let before = items.len();
            items.retain(|t| {
                let name = t.get("uriTemplate").and_then(Value::as_str).unwrap_or("");
                self.call(Kind::Resource, name).is_ok()
            });
            gone += before - items.len();
        }
        if let Some(skills) = result.get_mut("skills").and_then(Value::as_array_mut) {
            let before = skills.len();
            skills.retain(|s| {
                let files = s.get("resources").and_then(Value::as_array);
                self.call(Kind::Resource, &uri_of(s)).is_ok()
                    && files
                        .into_iter()
                        .flatten()
                        .all(|f| self.call(Kind::Resource, &uri_of(f)).is_ok())
            });
            gone += before - skills.len();
        }
        gone
    }

    /// Decides a call of `name` (`tools/call`, `prompts/get`; for a
    /// resource its URI: `resources/read`, `skills/get`). A name xy's
    /// listing did not have passes only if the user approved that name (or
    /// the mode lets everything through, or a first `pin` listing would).
    /// A resource the firewall does not pin passes; a skill passes when
    /// every file of it does.
    pub(crate) fn call(&self, kind: Kind, name: &str) -> Result<(), HeldBack> {
        use xy_core::firewall::FirewallMode;
        if self.policy.mode == FirewallMode::Off {
            return Ok(());
        }
        if kind == Kind::Resource {
            if !xy_core::firewall::pins_uri(name) {
                return Ok(());
            }
            if let Some(files) = self.skills.get(name) {
                for f in files.iter().filter(|f| f.as_str() != name) {
                    self.call(kind, f)?;
                }
            }
        }
        let reason = match self.of(kind).get(name) {
            Some(v) if v.state.visible() => return Ok(()),
            Some(v) => v.reason.clone(),
            None => {
                let approved = self.policy.of(kind).approved.contains_key(name);
                let first = self.policy.mode == FirewallMode::Pin && !self.policy.seen;
                if approved || first {
                    return Ok(());
                }
                format!("xy has not seen the server list this {}", kind.word())
            }
        };
        let word = kind.word();
        Err(HeldBack(format!(
            "xy held back the {word} {name} of server {server}: {reason}. \
             Until it is approved it is not offered to clients. To approve it: \
             xyctl tools approve {server} {name}",
            server = self.server,
        )))
    }

    /// The names clients see, sorted (to tell whether the visible set changed).
    pub(crate) fn visible_names(&self, kind: Kind) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .of(kind)
            .iter()
            .filter(|(_, v)| {
                v.state.visible() || self.policy.mode == xy_core::firewall::FirewallMode::Off
            })
            .map(|(k, _)| k.as_str())
            .collect();
        v.sort_unstable();
        v
    }
}

/// `a == b`, `a`'s `_meta` member aside (`b` has none).
fn same_but_meta(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let extra = usize::from(a.contains_key("_meta"));
    a.len() == b.len() + extra
        && a.iter()
            .filter(|(k, _)| k.as_str() != "_meta")
            .all(|(k, v)| b.get(k) == Some(v))
}

/// The object without `_meta`, shared.
pub(crate) fn without_meta(item: &Value) -> Option<Arc<Map<String, Value>>> {
    let mut m = item.as_object()?.clone();
    m.remove("_meta");
    Some(Arc::new(m))
}

/// The tools each server lists, by name with the digest of each, for
/// shadowing. Each ServerActor writes only its own entry (through its
/// [`DirectoryEntry`]) and reads the others' when it decides a listing or
/// shows its tools.
///
/// A documented lock exception (house style §4): the entries are read far
/// more than written, by many actors that must not wait on one another's
/// mailboxes; the lock is `std`, held only to copy or replace one entry,
/// never across an `.await`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Directory(Arc<RwLock<BTreeMap<String, Listed>>>);

/// One server's listed tools: `(name, digest)`.
type Listed = Arc<[(String, String)]>;

impl Directory {
    /// A server's entry; it is removed when the entry is dropped.
    pub(crate) fn entry(&self, server: &str) -> DirectoryEntry {
        DirectoryEntry {
            dir: self.clone(),
            server: server.to_owned(),
        }
    }

    /// The tools the servers other than `me` list: by name, every server
    /// listing one (in name order) with its digest.
    pub(crate) fn others(&self, me: &str) -> Foreign {
        let map = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = Foreign::new();
        for (server, tools) in map.iter().filter(|(s, _)| s.as_str() != me) {
            for (name, digest) in tools.iter() {
                out.entry(name.clone())
                    .or_default()
                    .push((server.clone(), digest.clone()));
            }
        }
        out
    }
}

/// One server's place in the [`Directory`].
#[derive(Debug)]
pub(crate) struct DirectoryEntry {
    dir: Directory,
    server: String,
}

impl DirectoryEntry {
    /// The tools this server lists now: `(name, digest)`.
    pub(crate) fn set(&self, tools: Vec<(String, String)>) {
        let mut map = self
            .dir
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(self.server.clone(), tools.into());
    }
}

impl Drop for DirectoryEntry {
    fn drop(&mut self) {
        let mut map = self
            .dir
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(&self.server);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use xy_core::firewall::{FirewallMode, digest};

    fn verdicts(listed: &[(Value, ToolState)]) -> Verdicts {
        let mut v = Verdicts {
            server: "s".into(),
            policy: Policy {
                seen: true,
                ..Policy::default()
            },
            ..Verdicts::default()
        };
        for (item, state) in listed {
            let name = item["name"].as_str().unwrap().to_owned();
            if state.visible() {
                v.policy.tools.approved.insert(name.clone(), digest(item));
            }
            v.tools.insert(
                name,
                Verdict {
                    object: without_meta(item),
                    state: *state,
                    reason: "new tool".into(),
                },
            );
        }
        v
    }

    #[test]
    fn a_listing_loses_its_held_back_items_and_keeps_its_cursor() {
        let a = json!({"name": "a", "description": "A"});
        let b = json!({"name": "b", "description": "B"});
        let v = verdicts(&[
            (a.clone(), ToolState::Approved),
            (b.clone(), ToolState::Pending),
        ]);
        let mut result = json!({"tools": [a, b, {"name": "c"}], "nextCursor": "2"});
        assert_eq!(v.filter(Kind::Tool, &mut result), 2);
        assert_eq!(
            result,
            json!({"tools": [{"name": "a", "description": "A"}], "nextCursor": "2"})
        );
    }

    #[test]
    fn a_silent_change_under_an_approved_name_is_decided_again() {
        let a = json!({"name": "a", "description": "A"});
        let v = verdicts(&[(a.clone(), ToolState::Approved)]);
        // `_meta` says nothing the model reads.
        assert!(v.visible(
            Kind::Tool,
            &json!({"name": "a", "description": "A", "_meta": {"t": 1}})
        ));
        assert!(!v.visible(Kind::Tool, &json!({"name": "a", "description": "A!"})));
        assert!(!v.visible(
            Kind::Tool,
            &json!({"name": "a", "description": "A", "title": "x"})
        ));
        assert!(!v.visible(Kind::Tool, &json!("a")));
    }

    #[test]
    fn calls_are_decided_by_name_with_the_approve_command() {
        let a = json!({"name": "a"});
        let b = json!({"name": "b"});
        let mut v = verdicts(&[(a, ToolState::Approved), (b, ToolState::Flagged)]);
        assert_eq!(v.call(Kind::Tool, "a"), Ok(()));
        let HeldBack(text) = v.call(Kind::Tool, "b").unwrap_err();
        assert!(
            text.contains("xy held back the tool b of server s: new tool"),
            "{text}"
        );
        assert!(text.ends_with("xyctl tools approve s b"), "{text}");
        assert!(v.call(Kind::Tool, "never-listed").is_err());
        assert!(v.call(Kind::Prompt, "a").is_err(), "prompts are apart");
        v.policy.mode = FirewallMode::Off;
        assert_eq!(v.call(Kind::Tool, "b"), Ok(()));
        assert_eq!(v.visible_names(Kind::Tool), ["a", "b"]);
    }

    /// A realistic listing: `n` tools with a description and a schema of
    /// three arguments.
    fn listing(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| {
                json!({"name": format!("tool_{i}"), "title": format!("Tool {i}"),
                    "description": format!("Does thing number {i} with the given path, query and limit; returns what it found."),
                    "inputSchema": {"type": "object", "required": ["path"], "properties": {
                        "path": {"type": "string", "description": "Where to look"},
                        "query": {"type": "string", "description": "What to look for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100}}},
                    "annotations": {"readOnlyHint": true}})
            })
            .collect()
    }

    /// The firewall's cost (SPEC §20 targets: ≤ 50 µs per `tools/list` of
    /// 100 tools, ≤ 5 µs per `tools/call`). Run with
    /// `cargo test -p xy-actors --release --lib firewall::tests::bench -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a test"]
    fn bench() {
        use std::time::Instant;
        let tools = listing(100);
        let mut v = verdicts(
            &tools
                .iter()
                .map(|t| (t.clone(), ToolState::Approved))
                .collect::<Vec<_>>(),
        );
        for t in &tools {
            v.raw_tools
                .insert(serde_json::to_string(t).unwrap().into(), true);
        }
        let answer =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "result": {"tools": tools}}))
                .unwrap();
        let runs = 2000;
        // The same page as xy listed it (another id): one comparison.
        let (_, own_at, _) = crate::bridge::raw::answer_id(&answer).unwrap();
        v.pages.push(Page {
            kind: Kind::Tool,
            before: answer[..own_at.start].into(),
            after: answer[own_at.end..].into(),
        });
        let client = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 123_456, "result": {"tools": listing(100)}}),
        )
        .unwrap();
        let (_, client_at, _) = crate::bridge::raw::answer_id(&client).unwrap();
        let mut page = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let ok = v.passes_as_is(Kind::Tool, &client, &client_at);
            page.push(t.elapsed().as_nanos());
            assert!(ok);
        }
        let pages = std::mem::take(&mut v.pages);
        // Item by item (a page of another shape: items xy listed, let through).
        let mut as_is = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let ok = v.passes_as_is(Kind::Tool, &answer, &(0..0));
            as_is.push(t.elapsed().as_nanos());
            assert!(ok);
        }
        let p50 = |mut xs: Vec<u128>| {
            xs.sort_unstable();
            xs[xs.len() / 2]
        };
        let mut scan_only = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let n = raw_items(&answer, Kind::Tool).map(|v| v.len());
            scan_only.push(t.elapsed().as_nanos());
            assert_eq!(n, Some(100));
        }
        // tools/list otherwise: the answer takes the Value path (parse, filter,
        // write) instead of going on as bytes; all of it is counted.
        let mut list = Vec::with_capacity(runs);
        let mut filter_only = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let mut msg: Value = serde_json::from_slice(&answer).unwrap();
            let f = Instant::now();
            let gone = v.filter(Kind::Tool, &mut msg["result"]);
            filter_only.push(f.elapsed().as_nanos());
            let out = serde_json::to_vec(&msg).unwrap();
            list.push(t.elapsed().as_nanos());
            assert_eq!(gone, 0);
            std::hint::black_box(out);
        }
        // tools/call on the fast path: the name is read with the routing
        // fields, then looked up; both counted against the parse without it.
        let body = bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"tool_42","arguments":{"path":"/tmp","query":"x","limit":5}}}"#,
        );
        let mut call = Vec::with_capacity(runs);
        for _ in 0..runs * 10 {
            let t = Instant::now();
            let raw = crate::bridge::raw::RawRequest::parse(&body).unwrap();
            let r = v.call(Kind::Tool, raw.name.as_deref().unwrap_or(""));
            call.push(t.elapsed().as_nanos());
            assert!(r.is_ok());
        }
        let mut lookup = Vec::with_capacity(runs);
        for _ in 0..runs * 10 {
            let t = Instant::now();
            let r = v.call(Kind::Tool, std::hint::black_box("tool_42"));
            lookup.push(t.elapsed().as_nanos());
            assert!(r.is_ok());
        }
        let us = |ns: u128| ns as f64 / 1000.0;
        let report = format!(
            "firewall bench p50: tools/list of 100 tools, the page xy listed {:.2} µs, item by item {:.1} µs (of which the borrowed parse {:.1} µs); changed: parse+filter+write {:.1} µs (filter alone {:.1} µs); \
             tools/call fast-path parse+decide {:.2} µs (decide alone {:.3} µs)",
            us(p50(page)),
            us(p50(as_is)),
            us(p50(scan_only)),
            us(p50(list)),
            us(p50(filter_only)),
            us(p50(call)),
            us(p50(lookup)),
        );
        drop(pages);
        xy_testbins_free_print(&report);
    }

    /// Prints a bench line (the crate's print lints allow no `println!`
    /// outside tests; this is a test).
    #[allow(clippy::print_stdout)]
    fn xy_testbins_free_print(line: &str) {
        println!("{line}");
    }

    #[test]
    fn a_listing_made_of_visible_texts_passes_as_is_and_anything_else_does_not() {
        let a = json!({"name": "a", "description": "A"});
        let b = json!({"name": "b"});
        let mut v = verdicts(&[
            (a.clone(), ToolState::Approved),
            (b.clone(), ToolState::Pending),
        ]);
        v.raw_tools.insert(a.to_string().into(), true);
        v.raw_tools.insert(b.to_string().into(), false);
        let line = |tools: Value| {
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}).to_string()
        };
        let no = 0..0;
        let passes = |v: &Verdicts, kind: Kind, text: &str, at: &std::ops::Range<usize>| {
            v.passes_as_is(kind, text.as_bytes(), at)
        };
        assert!(passes(&v, Kind::Tool, &line(json!([a])), &no));
        assert!(!passes(&v, Kind::Tool, &line(json!([a, b])), &no));
        assert!(!passes(
            &v,
            Kind::Tool,
            &line(json!([{"name": "a", "description": "A!"}])),
            &no
        ));
        // Spelled differently (spaces): the Value path decides.
        let spaced = r#"{"id":1,"result":{"tools":[{"name": "a","description":"A"}]}}"#;
        assert!(!passes(&v, Kind::Tool, spaced, &no));
        assert!(passes(
            &v,
            Kind::Tool,
            r#"{"id":1,"error":{"code":1,"message":"no"}}"#,
            &no
        ));
        assert!(!passes(&v, Kind::Tool, "not json", &no));
        // A whole page xy listed, under another id: one comparison.
        let page = |id: &str| format!(r#"{{"id":{id},"result":{{"tools":[{{"name": "b"}}]}}}}"#);
        let own = page("7");
        v.pages.push(Page {
            kind: Kind::Tool,
            before: own.as_bytes()[..6].into(),
            after: own.as_bytes()[7..].into(),
        });
        assert!(passes(&v, Kind::Tool, &page("1234"), &(6..10)));
        assert!(!passes(&v, Kind::Prompt, &page("1234"), &(6..10)));
        assert!(!passes(
            &v,
            Kind::Tool,
            &page("1234").replace('b', "c"),
            &(6..10)
        ));
    }

    #[test]
    fn the_directory_shows_others_and_forgets_a_dropped_entry() {
        let d = Directory::default();
        let a = d.entry("a");
        a.set(vec![("read".into(), "d1".into())]);
        let b = d.entry("b");
        b.set(vec![("write".into(), "d2".into())]);
        let c = d.entry("c");
        c.set(vec![("read".into(), "d3".into())]);
        assert_eq!(
            d.others("b")["read"],
            [("a".into(), "d1".into()), ("c".into(), "d3".into())]
        );
        drop(c);
        assert!(!d.others("a").contains_key("read"));
        drop(a);
        assert!(d.others("b").is_empty());
    }
}
