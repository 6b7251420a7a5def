//! The two MCP eras across the bridge (SPEC §13): what the current child
//! speaks (learnt in xy's handshake), the versions the endpoint takes, and
//! the translation between a 2026-era client and a 2025-era child (the
//! request loses the 2026 envelope, the answer is completed or replaced,
//! `initialize` and `server/discover` are answered from the child's
//! handshake). Pure data: the BridgeActor decides when it applies.

use serde_json::{Value, json};

use super::route::{Answer, error};
use xy_core::protocol::mcp::wire::{META_PROTOCOL_VERSION, VERSION_2025, VERSION_2026};

/// Every MCP version the endpoint takes in `MCP-Protocol-Version`.
pub(crate) const VERSIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    VERSION_2025,
    VERSION_2026,
];

/// The `_meta` keys every 2026-era request carries.
const ENVELOPE: [&str; 3] = [
    META_PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
];

/// Removes the 2026 request envelope from `_meta` (and `_meta` itself when
/// nothing else is left), for a child that speaks the 2025 era.
pub(crate) fn strip_envelope(msg: &mut Value) {
    let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        for k in ENVELOPE {
            meta.remove(k);
        }
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
}

/// The 2026 envelope of a 2025 session's requests: `clientCapabilities`
/// and `clientInfo` from its `initialize` params.
pub(crate) fn session_envelope(initialize_params: Option<&Value>) -> Value {
    let p = initialize_params;
    let caps = p
        .and_then(|p| p.get("capabilities"))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut e = json!({"io.modelcontextprotocol/clientCapabilities": caps});
    if let Some(info) = p
        .and_then(|p| p.get("clientInfo"))
        .filter(|i| i.is_object())
    {
        e["io.modelcontextprotocol/clientInfo"] = info.clone();
    }
    e
}

/// A request's `params._meta` object, made (with `params`) when missing;
/// `None` when either is there but not an object.
pub(crate) fn request_meta_mut(msg: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    if msg.get("params").is_none_or(Value::is_null) {
        msg["params"] = json!({});
    }
    msg["params"]
        .as_object_mut()?
        .entry("_meta")
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

/// Adds the 2026 request envelope to a 2025 client's request for a
/// 2026-only child: the protocol version, and its session's capabilities
/// and client info (none declared: `{}`). Keys the request has win.
pub(crate) fn add_envelope(msg: &mut Value, envelope: Option<&Value>) {
    let Some(meta) = request_meta_mut(msg) else {
        return;
    };
    meta.entry(META_PROTOCOL_VERSION)
        .or_insert_with(|| json!(VERSION_2026));
    if let Some(Value::Object(e)) = envelope {
        for (k, v) in e {
            meta.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    meta.entry("io.modelcontextprotocol/clientCapabilities")
        .or_insert_with(|| json!({}));
}

/// The methods whose 2026-era results carry `ttlMs` and `cacheScope`
/// (2026-07-28, SEP-2549; the Python SDK's client rejects them without;
/// the skills extension's lists and entries are cacheable too, SEP-2640).
pub(crate) fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "skills/list"
            | "skills/get"
    )
}

/// What the current child speaks, from xy's handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildEra {
    /// The child's `initialize` result (2025 era).
    pub(crate) init: Option<Value>,
    /// The child's `server/discover` result, when it lists 2026.
    pub(crate) discover: Option<Value>,
    /// Every version the child said it supports.
    pub(crate) versions: Vec<String>,
}

impl ChildEra {
    /// The answer to a client's `initialize`, from the child's own
    /// `initialize` result; `None` when the child does not speak 2025.
    pub(crate) fn initialize_result(&self, asked: Option<&str>) -> Option<Value> {
        let Some(mut init) = self.init.clone() else {
            return self.init_from_discover(asked);
        };
        // MCP version negotiation: a server that supports the version the
        // client asks for answers with that same version (an older SDK
        // client refuses a newer one). xy relays any 2025-era version up to
        // the child's own, which is what it speaks.
        let child = init.get("protocolVersion").and_then(Value::as_str);
        if let Some(asked) = asked
            && VERSIONS.contains(&asked)
            && asked < VERSION_2026
            && child.is_some_and(|c| asked <= c)
        {
            init["protocolVersion"] = json!(asked);
        }
        Some(init)
    }

    /// A 2025 client's `initialize` answered for a 2026-only child, from
    /// its `server/discover` result: the version the client asked for when
    /// it is a 2025-era one the endpoint takes (xy translates each request
    /// of the session), else `2025-11-25`.
    fn init_from_discover(&self, asked: Option<&str>) -> Option<Value> {
        let d = self.discover.as_ref()?;
        let version = asked
            .filter(|a| VERSIONS.contains(a) && *a < VERSION_2026)
            .unwrap_or(VERSION_2025);
        let info = d
            .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
            .cloned()
            .unwrap_or_else(|| json!({"name": "unknown", "version": ""}));
        let mut init = json!({
            "protocolVersion": version,
            "capabilities": d.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            "serverInfo": info,
        });
        if let Some(i) = d.get("instructions") {
            init["instructions"] = i.clone();
        }
        Some(init)
    }

    /// A client request as the child takes it, and what to do with its
    /// answer. A 2026-era client, a child in the 2025 era: the request
    /// loses the 2026 envelope (such a child refuses it), its answer gains
    /// `resultType`. `server/discover` is answered from the child's
    /// handshake once a `ping` shows the child answers (so the `mcp` probe
    /// still finds a wedged child).
    ///
    /// A 2025 client, a 2026-only child: the request gains the envelope
    /// its session's `initialize` declared (`envelope`: capabilities and
    /// client info); its `ping` becomes a `server/discover` answered `{}`
    /// (the child has no `ping`; the answer still shows it answers); its
    /// answers lose the 2026 envelope ([`Answer::Bare`]).
    pub(crate) fn translate(
        &self,
        era2026: bool,
        method: &str,
        id: &Value,
        mut msg: Value,
        envelope: Option<&Value>,
    ) -> (Value, Answer) {
        if !era2026 && self.init.is_none() && self.discover.is_some() {
            if method == "ping" {
                msg = json!({"jsonrpc": "2.0", "id": id, "method": "server/discover"});
                add_envelope(&mut msg, envelope);
                return (msg, Answer::Replace(json!({})));
            }
            add_envelope(&mut msg, envelope);
            return (msg, Answer::Bare);
        }
        if !era2026 || self.discover.is_some() {
            return (msg, Answer::AsIs);
        }
        strip_envelope(&mut msg);
        if method == "server/discover" {
            let ping = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
            (ping, Answer::Replace(self.discover_from_init()))
        } else {
            let cacheable = cacheable(method);
            (msg, Answer::Complete { cacheable })
        }
    }

    /// A `server/discover` result for 2026-era clients of a 2025-era child,
    /// from the child's `initialize` result.
    pub(crate) fn discover_from_init(&self) -> Value {
        let init = self.init.clone().unwrap_or_default();
        let versions = self.served_2026_versions();
        let mut r = json!({
            "supportedVersions": versions,
            "capabilities": init.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
        });
        if let Some(i) = init.get("instructions") {
            r["instructions"] = i.clone();
        }
        if let Some(info) = init.get("serverInfo") {
            r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": info});
        }
        r
    }

    /// The versions `server/discover` lists at the endpoint: a 2026 child's
    /// own, else the 2025 child's version and `2026-07-28` (xy translates).
    /// A 2026-era `-32022` lists the same (what the conformance suite checks).
    pub(crate) fn served_2026_versions(&self) -> Vec<String> {
        let mut versions = self.versions.clone();
        if self.discover.is_none() && !versions.iter().any(|v| v == VERSION_2026) {
            versions.push(VERSION_2026.to_owned());
        }
        versions
    }

    /// The `Unsupported protocol version` error, listing what the child speaks.
    pub(crate) fn unsupported(&self, id: &Value, requested: Option<Value>) -> Value {
        error(
            id,
            -32022,
            "Unsupported protocol version",
            Some(json!({
                "requested": requested.unwrap_or(Value::Null),
                "supported": self.versions,
            })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2026_envelope_is_stripped_and_the_rest_kept() {
        let mut m = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",
            "_meta":{META_PROTOCOL_VERSION:VERSION_2026,"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"t"}}});
        strip_envelope(&mut m);
        assert_eq!(m["params"]["_meta"], json!({"progressToken":"t"}));
        let mut m = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{META_PROTOCOL_VERSION:VERSION_2026}}});
        strip_envelope(&mut m);
        assert_eq!(m["params"], json!({}));
    }

    #[test]
    fn a_2025_session_of_a_2026_child_is_initialized_from_discover_and_enveloped() {
        let era = ChildEra {
            discover: Some(
                json!({"supportedVersions": [VERSION_2026], "capabilities": {"tools": {}},
                "instructions": "hi",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "n", "version": "2"}}}),
            ),
            versions: vec![VERSION_2026.to_owned()],
            ..ChildEra::default()
        };
        let init = era.initialize_result(Some("2025-06-18")).unwrap();
        assert_eq!(
            init,
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "n", "version": "2"}, "instructions": "hi"})
        );
        assert_eq!(
            era.initialize_result(Some(VERSION_2026)).unwrap()["protocolVersion"],
            VERSION_2025
        );
        let envelope = session_envelope(Some(&json!({"capabilities": {"roots": {}},
            "clientInfo": {"name": "c", "version": "1"}, "protocolVersion": VERSION_2025})));
        let req = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
            "params":{"name":"echo","_meta":{"progressToken":"t"}}});
        let (m, a) = era.translate(false, "tools/call", &json!(3), req, Some(&envelope));
        assert_eq!(a, Answer::Bare);
        assert_eq!(
            m["params"]["_meta"],
            json!({"progressToken": "t", META_PROTOCOL_VERSION: VERSION_2026,
                "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}})
        );
        let ping = json!({"jsonrpc":"2.0","id":4,"method":"ping"});
        let (m, a) = era.translate(false, "ping", &json!(4), ping, None);
        assert_eq!(m["method"], "server/discover");
        assert_eq!(m["params"]["_meta"][META_PROTOCOL_VERSION], VERSION_2026);
        assert_eq!(a, Answer::Replace(json!({})));
        // A 2026 client of the same child: as it came.
        let req = json!({"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{}}});
        assert_eq!(
            era.translate(true, "tools/list", &json!(5), req.clone(), None),
            (req, Answer::AsIs)
        );
    }

    #[test]
    fn served_versions_are_what_discover_lists() {
        let mut era = ChildEra {
            versions: vec![VERSION_2025.to_owned()],
            init: Some(json!({"protocolVersion": VERSION_2025})),
            ..ChildEra::default()
        };
        assert_eq!(era.served_2026_versions(), [VERSION_2025, VERSION_2026]);
        assert_eq!(
            era.discover_from_init()["supportedVersions"],
            json!([VERSION_2025, VERSION_2026])
        );
        era.init = None;
        era.discover = Some(json!({}));
        era.versions = vec![VERSION_2026.to_owned()];
        assert_eq!(era.served_2026_versions(), [VERSION_2026]);
    }

    #[test]
    fn cacheable_methods() {
        assert!(cacheable("server/discover") && cacheable("resources/read"));
        assert!(!cacheable("tools/call") && !cacheable("ping"));
    }
}
