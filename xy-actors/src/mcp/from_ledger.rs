//! Answers from the ledger (SPEC §26): what a server's endpoints say for
//! it while no child runs — its handshake answer and the items of its last
//! listing that the firewall lets clients see, each as the child wrote it,
//! marked with [`META_LEDGER`] in `_meta`. Built by the ServerActor's
//! firewall with each set of verdicts it publishes (so a held-back item is
//! never served), read by the endpoints without a message to the actor.
//! Pure data: the endpoint decides when it answers from here.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::Value;
use xy_core::firewall::Kind;
use xy_core::protocol::mcp::{RawJson, SERVED_MAX_BYTES, ServedGates, ServedListing, ToolSnapshot};

use super::gates::Gates;
use super::listing::{Handshake, Listing};

/// The `_meta` key of an answer xy gave from its ledger instead of the
/// server: `{"listedAt": "<when xy listed the server>"}` (docs/protocol.md).
pub(crate) const META_LEDGER: &str = "xy/ledger";

/// One server's answers from the ledger.
#[derive(Debug, Clone, Default)]
pub(crate) struct FromLedger {
    /// When xy listed the server (RFC 3339).
    pub(crate) listed_at: String,
    /// The child's `initialize` result (a 2025-era child).
    pub(crate) init: Option<Value>,
    /// The child's `server/discover` result (a 2026-only child).
    pub(crate) discover: Option<Value>,
    /// Every version the child said it supports.
    pub(crate) versions: Vec<String>,
    /// The items clients see, as the child wrote them.
    pub(crate) tools: Vec<Box<str>>,
    /// Their names, aligned with `tools`.
    pub(crate) tool_names: Vec<String>,
    /// The capability gates the ledger kept for this very listing (D280),
    /// provisional until the woken child's listing confirms them; `None`
    /// when none were kept for it.
    pub(crate) gates: Option<Arc<Gates>>,
    pub(crate) prompts: Option<Vec<Box<str>>>,
    pub(crate) resources: Option<Vec<Box<str>>>,
    pub(crate) templates: Option<Vec<Box<str>>>,
    /// The `skills/list` entries every file of which clients see (D282).
    pub(crate) skills: Option<Vec<Box<str>>>,
}

/// One list a listing method returns.
fn list_of(method: &str) -> Option<(&'static str, &'static str)> {
    Some(match method {
        "tools/list" => ("tools", "tools"),
        "prompts/list" => ("prompts", "prompts"),
        "resources/list" => ("resources", "resources"),
        "resources/templates/list" => ("resources", "resourceTemplates"),
        "skills/list" => ("extensions", "skills"),
        _ => return None,
    })
}

impl FromLedger {
    /// The answers of `served` under the firewall's current verdicts:
    /// `shown(kind, name)` says whether clients see an item; `gates` are
    /// the ones the ledger kept, used when learnt from this listing
    /// (`None` without a usable handshake answer).
    pub(crate) fn build(
        served: &ServedListing,
        gates: Option<&ServedGates>,
        shown: impl Fn(Kind, &str) -> bool,
    ) -> Option<FromLedger> {
        let parse = |t: &Option<RawJson>| {
            t.as_ref()
                .and_then(|t| serde_json::from_str::<Value>(t.as_str()).ok())
                .filter(Value::is_object)
        };
        let init = parse(&served.initialize);
        let discover = parse(&served.discover);
        if init.is_none() && discover.is_none() {
            return None;
        }
        // An item without a name (a resource without a URI) is not shown
        // (fail closed).
        let visible = |items: &[RawJson], kind: Kind| -> Vec<Box<str>> {
            let key = if kind == Kind::Resource {
                "uri"
            } else {
                "name"
            };
            items
                .iter()
                .filter(|t| name_of(t.as_str(), key).is_some_and(|n| shown(kind, &n)))
                .map(|t| t.as_str().into())
                .collect()
        };
        // Templates are not pinned (SPEC §27 pins what is read): as listed.
        let all = |items: &Option<Vec<RawJson>>| {
            items
                .as_ref()
                .map(|v| v.iter().map(|t| t.as_str().into()).collect())
        };
        let tools = visible(&served.tools, Kind::Tool);
        let tool_names = tools
            .iter()
            .map(|t| name_of(t, "name").unwrap_or_default())
            .collect();
        let gates = gates.and_then(|g| {
            let all: Vec<Value> = served
                .tools
                .iter()
                .filter_map(|t| serde_json::from_str(t.as_str()).ok())
                .collect();
            (super::gates::listing_key(&all) == g.listing).then(|| {
                let mut gates = Gates::from_stored(g);
                gates.provisional = Some(super::gates::names(&all));
                Arc::new(gates)
            })
        });
        Some(FromLedger {
            listed_at: served.listed_at.clone(),
            init,
            discover,
            versions: served.versions.clone(),
            tools,
            tool_names,
            gates,
            prompts: served.prompts.as_deref().map(|p| visible(p, Kind::Prompt)),
            resources: served
                .resources
                .as_deref()
                .map(|r| visible(r, Kind::Resource)),
            templates: all(&served.resource_templates),
            skills: served.skills.as_ref().map(|s| {
                s.iter()
                    .filter(|t| skill_shown(t.as_str(), &shown))
                    .map(|t| t.as_str().into())
                    .collect()
            }),
        })
    }

    /// The server's capabilities as its handshake answer gave them.
    pub(crate) fn capabilities(&self) -> Option<&Value> {
        self.init
            .as_ref()
            .or(self.discover.as_ref())
            .and_then(|r| r.get("capabilities"))
    }

    /// The `_meta` member marking an answer as the ledger's.
    pub(crate) fn marker(&self) -> Value {
        serde_json::json!({"listedAt": self.listed_at})
    }

    /// The answer to a listing method (`tools/list`, `prompts/list`,
    /// `resources/list`, `resources/templates/list`) without a cursor, as
    /// the bytes of a JSON-RPC answer with `id`; `None` when the ledger
    /// cannot answer it (the server must). A list the server does not
    /// offer (no capability) is answered `-32601`, as the server would.
    /// `hidden(tool)`: a tool this client is not shown (D210).
    pub(crate) fn list(
        &self,
        method: &str,
        id: &Value,
        era2026: bool,
        hidden: impl Fn(&str) -> bool,
    ) -> Option<Vec<u8>> {
        let (cap, key) = list_of(method)?;
        let items = match method {
            "tools/list" => Some(&self.tools),
            "prompts/list" => self.prompts.as_ref(),
            "resources/list" => self.resources.as_ref(),
            "skills/list" => self.skills.as_ref(),
            _ => self.templates.as_ref(),
        };
        let offered = if method == "skills/list" {
            crate::mcp::listing::offers_skills(self.capabilities())
        } else {
            crate::mcp::listing::offers(self.capabilities(), cap)
        };
        let id = serde_json::to_string(id).ok()?;
        let marker = serde_json::to_string(&self.marker()).ok()?;
        let Some(items) = items.filter(|_| offered) else {
            if offered {
                return None;
            }
            return Some(
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found","data":{{"{META_LEDGER}":{marker}}}}}}}"#
                )
                .into_bytes(),
            );
        };
        let size: usize = items.iter().map(|t| t.len() + 1).sum();
        let mut out = String::with_capacity(size + 200);
        out.push_str(r#"{"jsonrpc":"2.0","id":"#);
        out.push_str(&id);
        out.push_str(r#","result":{""#);
        out.push_str(key);
        out.push_str(r#"":["#);
        let is_tools = method == "tools/list";
        let mut first = true;
        for (i, t) in items.iter().enumerate() {
            if is_tools && self.tool_names.get(i).is_some_and(|n| hidden(n)) {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(t);
        }
        out.push(']');
        if era2026 {
            out.push_str(r#","resultType":"complete","ttlMs":0,"cacheScope":"private""#);
        }
        out.push_str(r#","_meta":{""#);
        out.push_str(META_LEDGER);
        out.push_str(r#"":"#);
        out.push_str(&marker);
        out.push_str("}}}");
        Some(out.into_bytes())
    }

    /// A fingerprint of what clients see of `tools/list` (`prompts/list`):
    /// when it changes, clients are told `list_changed`.
    pub(crate) fn fingerprint(&self, tools: bool) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        if tools {
            self.tools.hash(&mut h);
        } else {
            self.prompts.hash(&mut h);
        }
        h.finish()
    }
}

/// Whether clients see a `skills/list` entry: its `SKILL.md` and every
/// file it names are shown (a skill is offered only whole, D260).
fn skill_shown(text: &str, shown: &impl Fn(Kind, &str) -> bool) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let uri = |i: &Value| i.get("uri").and_then(Value::as_str).map(str::to_owned);
    let files = v.get("resources").and_then(Value::as_array);
    uri(&v).is_some_and(|u| shown(Kind::Resource, &u))
        && files
            .into_iter()
            .flatten()
            .all(|f| uri(f).is_some_and(|u| shown(Kind::Resource, &u)))
}

/// The string member `key` of one item's JSON text.
fn name_of(text: &str, key: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text).ok()?;
    v.get(key)?.as_str().map(str::to_owned)
}

/// The item texts of a listing as xy keeps them: each as the child wrote
/// it when known (`raw`, aligned with `items`), else its compact text.
pub(crate) fn texts(items: &[Value], raw: &[Box<str>]) -> Vec<RawJson> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            raw.get(i)
                .filter(|t| !t.is_empty())
                .and_then(|t| RawJson::parse(t))
                .unwrap_or_else(|| RawJson::of(v))
        })
        .collect()
}

/// What xy keeps of `listing` for answering without the server; `None`
/// without its handshake answer, or beyond [`SERVED_MAX_BYTES`].
pub(crate) fn served(listing: &Listing, listed_at: String) -> Option<ServedListing> {
    let hs = listing.handshake.as_ref()?;
    let s = ServedListing {
        listed_at,
        initialize: hs.init.as_ref().map(RawJson::of),
        discover: hs.discover.as_ref().map(RawJson::of),
        versions: hs.versions.clone(),
        tools: texts(&listing.tools, &listing.raw_tools),
        prompts: listing
            .prompts
            .as_ref()
            .map(|p| texts(p, &listing.raw_prompts)),
        resources: listing
            .resources
            .as_ref()
            .map(|r| r.iter().map(RawJson::of).collect()),
        resource_templates: listing
            .resource_templates
            .as_ref()
            .map(|r| r.iter().map(RawJson::of).collect()),
        skills: listing
            .skills
            .as_ref()
            .map(|r| r.iter().map(RawJson::of).collect()),
    };
    if s.size() > SERVED_MAX_BYTES {
        tracing::info!(
            bytes = s.size(),
            "the listing is too large to answer from the ledger; the server is started for it"
        );
        return None;
    }
    Some(s)
}

/// xy's listing as the ledger kept it (a daemon start): the firewall's
/// verdicts of that listing then know each item's object again.
pub(crate) fn listing(served: &ServedListing, snapshot: Option<&ToolSnapshot>) -> Listing {
    let parse = |items: &[RawJson]| -> (Vec<Value>, Vec<Box<str>>) {
        items
            .iter()
            .filter_map(|t| {
                let v = serde_json::from_str::<Value>(t.as_str()).ok()?;
                Some((v, t.as_str().into()))
            })
            .unzip()
    };
    let (tools, raw_tools) = parse(&served.tools);
    let (prompts, raw_prompts) = match served.prompts.as_deref().map(parse) {
        Some((p, r)) => (Some(p), r),
        None => (None, Vec::new()),
    };
    let value = |t: &Option<RawJson>| {
        t.as_ref()
            .and_then(|t| serde_json::from_str::<Value>(t.as_str()).ok())
    };
    let values = |items: &Option<Vec<RawJson>>| items.as_deref().map(|items| parse(items).0);
    Listing {
        tools,
        prompts,
        protocol_version: snapshot
            .map(|s| s.protocol_version.clone())
            .unwrap_or_default(),
        server_name: snapshot.and_then(|s| s.server_name.clone()),
        server_version: snapshot.and_then(|s| s.server_version.clone()),
        raw_tools,
        raw_prompts,
        resources: values(&served.resources),
        resource_templates: values(&served.resource_templates),
        skills: values(&served.skills),
        handshake: Some(Box::new(Handshake {
            init: value(&served.initialize),
            discover: value(&served.discover),
            versions: served.versions.clone(),
        })),
        ..Listing::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served() -> ServedListing {
        ServedListing {
            listed_at: "2026-12-04T00:00:00.000Z".into(),
            initialize: RawJson::parse(
                r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"}}"#,
            ),
            versions: vec!["2025-11-25".into()],
            tools: vec![
                RawJson::parse(r#"{"name":"a","description":"A"}"#).unwrap(),
                RawJson::parse(r#"{"name":"held","description":"H"}"#).unwrap(),
                RawJson::parse(r#"{"name":"new"}"#).unwrap(),
            ],
            ..ServedListing::default()
        }
    }

    #[test]
    fn only_visible_items_are_served_as_written_with_the_marker() {
        let pin = |k: Kind, n: &str| k == Kind::Tool && n == "a";
        let f = FromLedger::build(&served(), None, pin).unwrap();
        let a: Value =
            serde_json::from_slice(&f.list("tools/list", &json!(7), false, |_| false).unwrap())
                .unwrap();
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 7, "result": {"tools": [{"name": "a", "description": "A"}],
                "_meta": {META_LEDGER: {"listedAt": "2026-12-04T00:00:00.000Z"}}}})
        );
        let b: Value =
            serde_json::from_slice(&f.list("tools/list", &json!("x"), true, |_| false).unwrap())
                .unwrap();
        assert_eq!(b["result"]["resultType"], "complete");
        assert_eq!(b["result"]["cacheScope"], "private");
        // No prompts capability: the server's own answer; resources offered
        // but never listed: the server must answer.
        let p: Value =
            serde_json::from_slice(&f.list("prompts/list", &json!(1), false, |_| false).unwrap())
                .unwrap();
        assert_eq!(p["error"]["code"], -32601);
        assert!(f.list("tools/call", &json!(1), false, |_| false).is_none());
        // Resources by URI as the verdicts decide them; templates as listed.
        let mut r = served();
        r.initialize = RawJson::parse(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{}}}"#,
        );
        r.resources = Some(vec![
            RawJson::parse(r#"{"uri":"ui://app/held","name":"h"}"#).unwrap(),
            RawJson::parse(r#"{"uri":"file:///x","name":"x"}"#).unwrap(),
        ]);
        let shown = |k: Kind, n: &str| k != Kind::Resource || n == "file:///x";
        let f2 = FromLedger::build(&r, None, shown).unwrap();
        let v: Value = serde_json::from_slice(
            &f2.list("resources/list", &json!(1), false, |_| false)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            v["result"]["resources"],
            json!([{"uri": "file:///x", "name": "x"}])
        );
        assert!(
            f2.list("resources/templates/list", &json!(1), false, |_| false)
                .is_none(),
            "never listed"
        );
        // Skills: whole, or not at all; -32601 without the extension.
        let mut k = served();
        k.initialize = RawJson::parse(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/skills":{}}}}"#,
        );
        k.skills = Some(vec![
            RawJson::parse(
                r#"{"uri":"skill://a/SKILL.md","resources":[{"uri":"skill://a/x.md"}]}"#,
            )
            .unwrap(),
            RawJson::parse(r#"{"uri":"skill://b/SKILL.md"}"#).unwrap(),
        ]);
        let shown = |k: Kind, n: &str| k != Kind::Resource || n != "skill://a/x.md";
        let f3 = FromLedger::build(&k, None, shown).unwrap();
        let v: Value =
            serde_json::from_slice(&f3.list("skills/list", &json!(1), true, |_| false).unwrap())
                .unwrap();
        assert_eq!(
            v["result"]["skills"],
            json!([{"uri": "skill://b/SKILL.md"}])
        );
        assert!(v["result"]["_meta"][META_LEDGER].is_object());
        let v: Value =
            serde_json::from_slice(&f.list("skills/list", &json!(1), false, |_| false).unwrap())
                .unwrap();
        assert_eq!(v["error"]["code"], -32601, "no skills extension");
        // Off: everything listed.
        let off = FromLedger::build(&served(), None, |_, _| true).unwrap();
        assert_ne!(off.fingerprint(true), f.fingerprint(true));
        assert_eq!(off.tools.len(), 3);
        // No handshake answer: nothing to serve.
        let mut s = served();
        s.initialize = None;
        assert!(FromLedger::build(&s, None, |_, _| true).is_none());
    }

    #[test]
    fn texts_keep_what_the_child_wrote() {
        let items = [json!({"name": "b", "a": 1}), json!({"name": "c"})];
        let raw: [Box<str>; 2] = [r#"{"name":"b","a":1}"#.into(), "".into()];
        let t = texts(&items, &raw);
        assert_eq!(t[0].as_str(), r#"{"name":"b","a":1}"#);
        assert_eq!(t[1].as_str(), r#"{"name":"c"}"#);
    }
}
