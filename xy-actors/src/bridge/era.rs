//! The two MCP eras across the bridge (SPEC §13): what the current child
//! speaks (learnt in xy's handshake), the versions the endpoint takes, and
//! the translation between a 2026-era client and a 2025-era child (the
//! request loses the 2026 envelope, the answer is completed or replaced,
//! `initialize` and `server/discover` are answered from the child's
//! handshake). Pure data: the BridgeActor decides when it applies.

use serde_json::{Value, json};

use super::route::{Answer, META_VERSION, V2026, error};

/// The 2025-era version xy offers a child in `initialize`.
pub(crate) const V2025: &str = "2025-11-25";
/// Every MCP version the endpoint takes in `MCP-Protocol-Version`.
pub(crate) const VERSIONS: [&str; 5] = ["2024-11-05", "2025-03-26", "2025-06-18", V2025, V2026];

/// The `_meta` keys every 2026-era request carries.
const ENVELOPE: [&str; 3] = [
    META_VERSION,
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

/// The methods whose 2026-era results carry `ttlMs` and `cacheScope`
/// (2026-07-28, SEP-2549; the Python SDK's client rejects them without).
pub(crate) fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
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
        let mut init = self.init.clone()?;
        // MCP version negotiation: a server that supports the version the
        // client asks for answers with that same version (an older SDK
        // client refuses a newer one). xy relays any 2025-era version up to
        // the child's own, which is what it speaks.
        let child = init.get("protocolVersion").and_then(Value::as_str);
        if let Some(asked) = asked
            && VERSIONS.contains(&asked)
            && asked < V2026
            && child.is_some_and(|c| asked <= c)
        {
            init["protocolVersion"] = json!(asked);
        }
        Some(init)
    }

    /// A client request as the child takes it, and what to do with its
    /// answer. A 2026-era client, a child in the 2025 era: the request
    /// loses the 2026 envelope (such a child refuses it), its answer gains
    /// `resultType`. `server/discover` is answered from the child's
    /// handshake once a `ping` shows the child answers (so the `mcp` probe
    /// still finds a wedged child).
    pub(crate) fn translate(
        &self,
        era2026: bool,
        method: &str,
        id: &Value,
        mut msg: Value,
    ) -> (Value, Answer) {
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
        let mut versions = self.versions.clone();
        versions.push(V2026.to_owned());
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
            "_meta":{META_VERSION:V2026,"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"t"}}});
        strip_envelope(&mut m);
        assert_eq!(m["params"]["_meta"], json!({"progressToken":"t"}));
        let mut m = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{META_VERSION:V2026}}});
        strip_envelope(&mut m);
        assert_eq!(m["params"], json!({}));
    }

    #[test]
    fn cacheable_methods() {
        assert!(cacheable("server/discover") && cacheable("resources/read"));
        assert!(!cacheable("tools/call") && !cacheable("ping"));
    }
}
