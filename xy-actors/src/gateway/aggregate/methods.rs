//! The aggregate's MCP methods (SPEC §26): each answer built from the
//! [`Catalog`]'s lists of the view's servers, each call routed to the
//! server that offers the item under its own name. In mode `search`,
//! `tools/list` holds `find_tools` and `call_tool` alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use xy_core::config::AggregateMode;
use xy_core::firewall::Kind;
use xy_core::protocol::aggregate::{
    FIND_DEFAULT_LIMIT, FIND_MAX_LIMIT, ToolHit, ToolsSearchResult, prefixed_names,
};
use xy_core::protocol::mcp::{CallOutcome, app_only};

use super::catalog::{List, Listed};
use super::{Aggregate, View};
use crate::mcp::verdicts::HeldBack;

/// How long a call through the aggregate may take before it fails (the
/// server's own bounds usually end it first).
const CALL_WAIT: Duration = Duration::from_secs(600);
/// Server names `find_tools`' description lists at most (its size stays
/// bounded however many servers there are).
const NAMED_SERVERS: usize = 40;

/// Who asks: the client as call records name it.
pub(crate) struct Who {
    pub(crate) client: String,
    /// A 2026 client's declared capabilities (its request's `_meta`);
    /// `None` for a 2025 client.
    pub(crate) caps2026: Option<Value>,
}

/// What the aggregate advertises (both eras): the skills extension too,
/// whose lists and reads pass it like resources (SPEC §27).
pub(crate) fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true},
        "resources": {"listChanged": true},
        "extensions": {(xy_core::protocol::mcp::SKILLS_EXTENSION): {}}})
}

/// The instructions of a view.
pub(crate) fn instructions(view: &View) -> String {
    match view.mode {
        AggregateMode::Full => "xy serves the tools of several MCP servers here; each tool's \
            name is <server>__<tool>."
            .to_owned(),
        AggregateMode::Search => "xy serves the tools of several MCP servers here. Call \
            find_tools with what you want to do to get matching tools with their input \
            schemas, then call_tool with a returned name and its arguments."
            .to_owned(),
    }
}

/// One item the view offers: the aggregate's name, the server, the
/// server's name for it, and its definition: the `at`th of the server's
/// list (shared with the catalog, not copied).
struct Item {
    name: String,
    server: String,
    own: String,
    list: Arc<Vec<Value>>,
    at: usize,
}

/// The tools (or prompts) the view offers, with their aggregate names.
/// Built once per change of the servers' lists and shared by every
/// request until then ([`Aggregate::offered`]): naming and copying every
/// definition per request was most of a `find_tools` call's cost.
pub(crate) struct Offered {
    items: Vec<Item>,
    by_name: HashMap<String, usize>,
    /// Servers whose list could not be had, and why.
    unavailable: BTreeMap<String, String>,
    /// What it was built from: each server's list as the catalog keeps it
    /// (held, so comparing by pointer stays sound) or why there was none.
    from: Vec<(String, Source)>,
}

/// A server's list as an offered set was built from it, or why it had none.
type Source = Result<Arc<Vec<Value>>, String>;

/// Which servers a view shows (`None`: every server), the key of what is
/// kept per view.
pub(crate) type ViewKey = Option<Vec<String>>;

impl Offered {
    /// `item`'s definition as the view offers it: as its server lists it,
    /// under the aggregate's name. Copied when asked for, so the offered
    /// set costs no second copy of every definition.
    fn definition(&self, item: &Item) -> Value {
        let mut d = self.source(item).clone();
        d["name"] = json!(item.name);
        d
    }

    /// `item` as its server lists it (its own name).
    fn source<'a>(&self, item: &'a Item) -> &'a Value {
        &item.list[item.at]
    }

    /// Whether `lists` are the very lists this was built from.
    pub(crate) fn built_from(&self, lists: &[(String, Listed)]) -> bool {
        self.from.len() == lists.len()
            && self.from.iter().zip(lists).all(|((a, mine), (b, got))| {
                a == b
                    && match (mine, got) {
                        (Ok(x), Ok(y)) => Arc::ptr_eq(x, y),
                        (Err(x), Err(y)) => *x == y.0,
                        _ => false,
                    }
            })
    }
}

async fn offered(agg: &Arc<Aggregate>, view: &View, list: List) -> Arc<Offered> {
    let servers = agg.catalog.servers(view.servers.as_deref());
    let lists = agg.catalog.lists(&servers, list).await;
    agg.offered(view, list, &lists, || build_offered(lists.clone(), list))
}

fn build_offered(lists: Vec<(String, Listed)>, list: List) -> Offered {
    let mut unavailable = BTreeMap::new();
    let mut raw: Vec<(&str, &Value, &Arc<Vec<Value>>, usize)> = Vec::new();
    for (server, got) in &lists {
        match got {
            Ok(items) => {
                for (at, item) in items.iter().enumerate() {
                    // App-only tools (MCP Apps) never reach a model-facing
                    // list (SPEC §27).
                    if list == List::Tools && app_only(item) {
                        continue;
                    }
                    if item.get("name").and_then(Value::as_str).is_some() {
                        raw.push((server, item, items, at));
                    }
                }
            }
            Err(e) => {
                tracing::info!(server = %server, "aggregate: {}", e.0);
                unavailable.insert(server.clone(), e.0.clone());
            }
        }
    }
    let names = prefixed_names(
        raw.iter()
            .map(|(s, i, _, _)| (*s, i["name"].as_str().unwrap_or(""))),
    );
    let mut items = Vec::with_capacity(raw.len());
    let mut by_name = HashMap::new();
    for (server, definition, list, at) in raw {
        let own = definition["name"].as_str().unwrap_or("").to_owned();
        let Some(name) = names.get(&(server.to_owned(), own.clone())) else {
            continue;
        };
        if by_name.contains_key(name) {
            // The same name twice in one server's list: the first stands.
            continue;
        }
        by_name.insert(name.clone(), items.len());
        items.push(Item {
            name: name.clone(),
            server: server.to_owned(),
            own,
            list: Arc::clone(list),
            at,
        });
    }
    let from = lists
        .into_iter()
        .map(|(server, got)| (server, got.map_err(|e| e.0)))
        .collect();
    Offered {
        items,
        by_name,
        unavailable,
        from,
    }
}

fn rpc_error(code: i64, message: String) -> Value {
    json!({"error": {"code": code, "message": message}})
}

fn ok(result: Value) -> Value {
    json!({ "result": result })
}

/// The `_meta` keys of a 2026 request's envelope.
const ENVELOPE_2026: [&str; 3] = [
    xy_core::protocol::mcp::wire::META_PROTOCOL_VERSION,
    xy_core::protocol::mcp::wire::META_CLIENT_CAPABILITIES,
    xy_core::protocol::mcp::wire::META_CLIENT_INFO,
];

/// The answer (`result` or `error`, without `id`) to `method`.
pub(crate) async fn answer(
    agg: &Arc<Aggregate>,
    view: &View,
    who: &Who,
    method: &str,
    msg: &Value,
) -> Value {
    let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
    match method {
        "ping" | "logging/setLevel" => ok(json!({})),
        "server/discover" => ok(json!({
            "supportedVersions": [xy_core::protocol::mcp::wire::VERSION_2026],
            "capabilities": capabilities(),
            "instructions": instructions(view),
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo":
                {"name": "xy", "title": "xy aggregate", "version": env!("CARGO_PKG_VERSION")}},
        })),
        "tools/list" => match view.mode {
            AggregateMode::Full => {
                let o = offered(agg, view, List::Tools).await;
                let tools: Vec<Value> = o.items.iter().map(|i| o.definition(i)).collect();
                ok(json!({ "tools": tools }))
            }
            AggregateMode::Search => ok(json!({ "tools": search_tools(agg, view) })),
        },
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if view.mode == AggregateMode::Search {
                match name {
                    "find_tools" => return find_tools(agg, view, &params).await,
                    "call_tool" => {
                        let args = params.get("arguments").cloned().unwrap_or(Value::Null);
                        let Some(target) = args.get("name").and_then(Value::as_str) else {
                            return tool_error(
                                "call_tool needs `name`: a name find_tools returned",
                            );
                        };
                        let arguments = args.get("arguments").cloned();
                        return call(agg, view, who, target, arguments, &params, true).await;
                    }
                    _ => {}
                }
            }
            call(
                agg,
                view,
                who,
                name,
                params.get("arguments").cloned(),
                &params,
                false,
            )
            .await
        }
        "prompts/list" => {
            let o = offered(agg, view, List::Prompts).await;
            let prompts: Vec<Value> = o.items.iter().map(|i| o.definition(i)).collect();
            ok(json!({ "prompts": prompts }))
        }
        "prompts/get" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let o = offered(agg, view, List::Prompts).await;
            let Some(item) = o.by_name.get(name).map(|i| &o.items[*i]) else {
                return rpc_error(
                    -32602,
                    format!(
                        "unknown prompt {name:?}: prompts/list names what {} offers",
                        view.path
                    ),
                );
            };
            let mut p = without_envelope(&params);
            p["name"] = json!(item.own);
            forward(agg, &item.server, "prompts/get", p, None).await
        }
        "resources/list" | "resources/templates/list" | "skills/list" => {
            let list = match method {
                "resources/list" => List::Resources,
                "skills/list" => List::Skills,
                _ => List::Templates,
            };
            let servers = agg.catalog.servers(view.servers.as_deref());
            let mut all = Vec::new();
            for (_, got) in agg.catalog.lists(&servers, list).await {
                if let Ok(items) = got {
                    all.extend(items.iter().cloned());
                }
            }
            ok(json!({ (list.key()): all }))
        }
        "resources/read" | "skills/get" | "resources/directory/read" => {
            let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
            let owner = match method {
                "skills/get" => skill_owner(agg, view, uri).await,
                _ => None,
            };
            let owner = match owner {
                Some(o) => Some(o),
                None => resource_owner(agg, view, uri).await,
            };
            match owner {
                Some(server) => {
                    let p = without_envelope(&params);
                    forward(agg, &server, method, p, None).await
                }
                None => rpc_error(
                    -32002,
                    format!(
                        "Resource not found: no server of {} offers {uri:?}",
                        view.path
                    ),
                ),
            }
        }
        "completion/complete" => ok(json!({"completion": {"values": []}})),
        _ => rpc_error(
            xy_core::protocol::mcp::wire::METHOD_NOT_FOUND,
            format!(
                "method not found: {method} (xy's aggregate at {})",
                view.path
            ),
        ),
    }
}

/// The server whose `skills/list` names the skill `uri` (the first by name).
async fn skill_owner(agg: &Arc<Aggregate>, view: &View, uri: &str) -> Option<String> {
    let servers = agg.catalog.servers(view.servers.as_deref());
    agg.catalog
        .lists(&servers, List::Skills)
        .await
        .into_iter()
        .find(|(_, got)| {
            got.as_ref().is_ok_and(|items| {
                items
                    .iter()
                    .any(|s| s.get("uri").and_then(Value::as_str) == Some(uri))
            })
        })
        .map(|(server, _)| server)
}

/// A client's `params` for the aggregate's 2025 session with a server: a
/// 2026 client's `_meta` envelope left out, as it would contradict that
/// session's headers (`-32020`).
fn without_envelope(params: &Value) -> Value {
    let mut p = params.clone();
    if let Some(o) = p.as_object_mut() {
        let meta = o.get_mut("_meta").and_then(Value::as_object_mut);
        if let Some(m) = meta {
            m.retain(|k, _| !ENVELOPE_2026.contains(&k.as_str()));
            if m.is_empty() {
                o.remove("_meta");
            }
        }
    }
    p
}

/// The server offering `uri`: the first (by name) whose resources list it,
/// else the first whose template's fixed start it begins with.
async fn resource_owner(agg: &Arc<Aggregate>, view: &View, uri: &str) -> Option<String> {
    let servers = agg.catalog.servers(view.servers.as_deref());
    for (server, got) in agg.catalog.lists(&servers, List::Resources).await {
        if got.is_ok_and(|items| {
            items
                .iter()
                .any(|r| r.get("uri").and_then(Value::as_str) == Some(uri))
        }) {
            return Some(server);
        }
    }
    for (server, got) in agg.catalog.lists(&servers, List::Templates).await {
        let matches = got.is_ok_and(|items| {
            items.iter().any(|t| {
                t.get("uriTemplate")
                    .and_then(Value::as_str)
                    .and_then(|t| t.split('{').next())
                    .is_some_and(|fixed| !fixed.is_empty() && uri.starts_with(fixed))
            })
        });
        if matches {
            return Some(server);
        }
    }
    None
}

/// A tool result saying what went wrong (the model reads it).
fn tool_error(text: &str) -> Value {
    ok(json!({"content": [{"type": "text", "text": text}], "isError": true}))
}

/// A call of the aggregate's tool `name`; `via_call_tool`: asked through
/// `call_tool` (an unknown name is then a tool result, not an error);
/// `params`: the client's own, whose `inputResponses` and `requestState`
/// (a 2026 client's retry) go with the call.
async fn call(
    agg: &Arc<Aggregate>,
    view: &View,
    who: &Who,
    name: &str,
    arguments: Option<Value>,
    params: &Value,
    via_call_tool: bool,
) -> Value {
    let o = offered(agg, view, List::Tools).await;
    if let Some(item) = o.by_name.get(name).map(|i| &o.items[*i]) {
        if let Some(caps) = &who.caps2026
            && let Some(answer) = call_2026(agg, item, who, caps, arguments.clone(), params).await
        {
            return answer;
        }
        let mut p = json!({"name": item.own, "_meta": {
            xy_core::protocol::mcp::wire::META_CLIENT_INFO: {"name": who.client}}});
        if let Some(a) = arguments {
            p["arguments"] = a;
        }
        return forward(agg, &item.server, "tools/call", p, Some(CALL_WAIT)).await;
    }
    if let Some(answer) = held_back(agg, view, who, name) {
        return answer;
    }
    let text = format!(
        "xy: no tool named {name:?} at {}{}",
        view.path,
        if view.mode == AggregateMode::Search {
            "; find_tools returns the names call_tool takes"
        } else {
            "; tools/list names what it offers"
        }
    );
    if via_call_tool {
        tool_error(&text)
    } else {
        rpc_error(-32602, text)
    }
}

/// A `tools/call` of `name` refused unread (SPEC §24, D315): a call
/// record (`rpc_error`) of the server that offers `name`, or whose
/// `<server>__` it starts with; a warning in `daemon.log` when no server
/// can be made out (a `call_tool`, whose target is in its unread arguments,
/// or a name no server offers).
pub(crate) async fn record_refused(
    agg: &Arc<Aggregate>,
    view: &View,
    who: &Who,
    name: &str,
    why: &str,
) {
    let o = offered(agg, view, List::Tools).await;
    let target = match o.by_name.get(name).map(|i| &o.items[*i]) {
        Some(item) => Some((item.server.clone(), item.own.clone())),
        None => agg
            .catalog
            .servers(view.servers.as_deref())
            .into_keys()
            .find_map(|s| {
                let tool = name.strip_prefix(&format!("{s}__"))?.to_owned();
                Some((s, tool))
            }),
    };
    let Some((server, tool)) = target else {
        tracing::warn!(
            endpoint = %view.path,
            "a tools/call of {name:?} refused unread ({why}): no server of the endpoint offers it"
        );
        return;
    };
    if let Some(calls) = &agg.calls {
        calls.record_call(
            &server,
            std::time::SystemTime::now(),
            Some(&who.client),
            &tool,
            Duration::ZERO,
            CallOutcome::RpcError,
        );
    }
}

/// A 2026 client's call of `item` on a bridged server, sent in 2026 form
/// with the client's own capabilities (D317): a question the child asks
/// that the client did not declare fails the call with `-32021` (SPEC
/// §19, §24), one it declared reaches it as an `InputRequiredResult` and
/// its retry goes back the same way. `None` for a server not bridged
/// (an HTTP or remote server keeps the aggregate's 2025 session).
async fn call_2026(
    agg: &Arc<Aggregate>,
    item: &Item,
    who: &Who,
    caps: &Value,
    arguments: Option<Value>,
    params: &Value,
) -> Option<Value> {
    use xy_core::protocol::mcp::wire;
    let snap = agg.catalog.routes.borrow().get(&item.server).cloned()?;
    if !super::upstream::Upstream::bridged(&snap) {
        return None;
    }
    let mut p = json!({"name": item.own, "_meta": {
        wire::META_PROTOCOL_VERSION: wire::VERSION_2026,
        wire::META_CLIENT_CAPABILITIES: caps,
        wire::META_CLIENT_INFO: {"name": who.client}}});
    if let Some(a) = arguments {
        p["arguments"] = a;
    }
    for key in ["inputResponses", "requestState"] {
        if let Some(v) = params.get(key) {
            p[key] = v.clone();
        }
    }
    let answer = agg
        .catalog
        .upstream
        .request_2026(&item.server, &snap, "tools/call", p, CALL_WAIT)
        .await;
    Some(match answer {
        Ok((_, answer)) => {
            let mut out = serde_json::Map::new();
            for key in ["result", "error"] {
                if let Some(v) = answer.get(key) {
                    out.insert(key.to_owned(), v.clone());
                }
            }
            if out.is_empty() {
                return Some(rpc_error(
                    -32603,
                    format!("xy: server {} answered nothing usable", item.server),
                ));
            }
            Value::Object(out)
        }
        Err(e) => {
            json!({"error": {"code": -32603, "message": e.0, "data": {"server": item.server}}})
        }
    })
}

/// A name that is `<server>__<tool>` of a tool the firewall holds back:
/// the firewall's own refusal, recorded as a held-back call.
fn held_back(agg: &Arc<Aggregate>, view: &View, who: &Who, name: &str) -> Option<Value> {
    let servers = agg.catalog.servers(view.servers.as_deref());
    for (server, snap) in &servers {
        let Some(tool) = name.strip_prefix(&format!("{server}__")) else {
            continue;
        };
        let verdicts = snap.borrow().firewall.as_ref().map(|f| f.current())?;
        if let Err(HeldBack(text)) = verdicts.call(Kind::Tool, tool) {
            if let Some(calls) = &agg.calls {
                calls.record_call(
                    server,
                    std::time::SystemTime::now(),
                    Some(&who.client),
                    tool,
                    Duration::ZERO,
                    CallOutcome::HeldBack,
                );
            }
            return Some(tool_error(&text));
        }
    }
    None
}

/// `method` with `params` to `server`: its answer (`result` or `error`).
async fn forward(
    agg: &Arc<Aggregate>,
    server: &str,
    method: &str,
    params: Value,
    wait: Option<Duration>,
) -> Value {
    let snap = agg.catalog.routes.borrow().get(server).cloned();
    let Some(snap) = snap else {
        return rpc_error(-32603, format!("xy: server {server} is gone"));
    };
    let wait = wait.unwrap_or(Duration::from_secs(60));
    match agg
        .catalog
        .upstream
        .request(server, &snap, method, params, wait)
        .await
    {
        Ok(answer) => {
            let mut out = serde_json::Map::new();
            for key in ["result", "error"] {
                if let Some(v) = answer.get(key) {
                    out.insert(key.to_owned(), v.clone());
                }
            }
            if out.is_empty() {
                return rpc_error(
                    -32603,
                    format!("xy: server {server} answered nothing usable"),
                );
            }
            Value::Object(out)
        }
        Err(e) => json!({"error": {"code": -32603, "message": e.0, "data": {"server": server}}}),
    }
}

/// `find_tools` and `call_tool`, the whole `tools/list` of mode `search`.
fn search_tools(agg: &Arc<Aggregate>, view: &View) -> Vec<Value> {
    let servers: Vec<String> = agg
        .catalog
        .servers(view.servers.as_deref())
        .into_keys()
        .collect();
    let mut named = servers
        .iter()
        .take(NAMED_SERVERS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if servers.len() > NAMED_SERVERS {
        named.push_str(", …");
    }
    vec![
        json!({
            "name": "find_tools",
            "description": format!(
                "Find tools of the MCP servers xy serves here ({} servers: {named}). Returns \
                 the best matches, each with its name and input schema; then call one with \
                 call_tool.", servers.len()),
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words"},
                "limit": {"type": "integer", "minimum": 1, "maximum": FIND_MAX_LIMIT,
                    "description": format!("At most this many tools (default {FIND_DEFAULT_LIMIT})")},
                "server": {"type": "string", "description": "Only this server's tools"}},
                "required": ["query"]},
        }),
        json!({
            "name": "call_tool",
            "description": "Call a tool find_tools returned, by the name it returned, with \
                            arguments that follow its input schema.",
            "inputSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "A name find_tools returned"},
                "arguments": {"type": "object", "description": "The tool's arguments ({} for none)"}},
                "required": ["name", "arguments"]},
        }),
    ]
}

/// `find_tools {query, limit?, server?}`.
async fn find_tools(agg: &Arc<Aggregate>, view: &View, params: &Value) -> Value {
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let Some(query) = args.get("query").and_then(Value::as_str) else {
        return tool_error("find_tools needs `query`: what you want to do, in a few words");
    };
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(FIND_DEFAULT_LIMIT, |n| {
            u32::try_from(n).unwrap_or(FIND_MAX_LIMIT)
        })
        .clamp(1, FIND_MAX_LIMIT) as usize;
    let server = args.get("server").and_then(Value::as_str);
    let r = search(agg, view, query, server, limit).await;
    let tools: Vec<Value> = r.tools.into_iter().map(|h| h.definition).collect();
    let structured = json!({ "tools": tools });
    ok(json!({
        "content": [{"type": "text", "text": serde_json::to_string(&structured).unwrap_or_default()}],
        "structuredContent": structured,
    }))
}

/// What a search index was built from: the offered tools (by identity),
/// the servers' instructions and the model file.
pub(crate) struct IndexKey {
    offered: Arc<Offered>,
    instructions: BTreeMap<String, Option<String>>,
    model: Option<std::path::PathBuf>,
}

impl IndexKey {
    pub(crate) fn same(&self, other: &IndexKey) -> bool {
        Arc::ptr_eq(&self.offered, &other.offered)
            && self.instructions == other.instructions
            && self.model == other.model
    }
}

/// The ranked tools of `view` for `query` (of `server` only, when given),
/// by xy's ranking ([`xy_core::search`]); the index is built once per
/// change of what the view offers.
pub(crate) async fn search(
    agg: &Arc<Aggregate>,
    view: &View,
    query: &str,
    server: Option<&str>,
    limit: usize,
) -> ToolsSearchResult {
    let o = offered(agg, view, List::Tools).await;
    let instructions: BTreeMap<String, Option<String>> = o
        .from
        .iter()
        .map(|(server, _)| (server.clone(), agg.catalog.upstream.instructions(server)))
        .collect();
    // `xy.kdl`'s `search { model }` (D252): read when an index is built.
    let model = agg.search_model();
    let key = IndexKey {
        offered: Arc::clone(&o),
        instructions,
        model,
    };
    let index = agg.index(view, key, |key| {
        let docs = o
            .items
            .iter()
            .map(|i| {
                let own = o.source(i);
                let ins = key.instructions.get(&i.server).cloned().flatten();
                xy_core::search::ToolDoc::from_tool(&i.server, ins.as_deref(), own)
            })
            .collect();
        let index = xy_core::search::Index::build(docs);
        match key
            .model
            .as_deref()
            .map(xy_core::search::StaticEmbeddings::load)
        {
            Some(Ok(m)) => index.with_model(m),
            Some(Err(e)) => {
                tracing::warn!("tool search: the model in xy.kdl cannot be used ({e}); BM25 only");
                index
            }
            None => index,
        }
    });
    let tools = index
        .search(query, limit, server)
        .into_iter()
        .filter_map(|hit| {
            let i = o.items.get(hit.doc)?;
            Some(ToolHit {
                name: i.name.clone(),
                server: i.server.clone(),
                tool: i.own.clone(),
                score: f64::from(hit.score),
                definition: o.definition(i),
            })
        })
        .collect();
    ToolsSearchResult {
        tools,
        unavailable: o.unavailable.clone(),
    }
}
