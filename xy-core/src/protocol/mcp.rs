//! MCP as xy reports it (SPEC §12): `status.mcp`, the `tools` method's
//! result, the tool ledger file's snapshots, and the pure diff between two
//! snapshots. The MCP wire constants the probe sends live here too;
//! `served` holds the listing a ledger keeps for answering without the
//! server (SPEC §26).

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod served;
pub use served::{GATES_MAX, RawJson, SERVED_MAX_BYTES, ServedGates, ServedListing};

/// MCP wire names and versions the probe uses (one place, like [`super::method`]).
pub mod wire {
    /// The 2026 revision: stateless, `server/discover`.
    pub const VERSION_2026: &str = "2026-07-28";
    /// The newest 2025-era revision, offered by the fallback `initialize`.
    pub const VERSION_2025: &str = "2025-11-25";
    /// The oldest 2025-era revision accepted from a server.
    pub const OLDEST_2025: &str = "2024-11-05";
    /// `_meta` key: the request's protocol version (2026).
    pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// `_meta` key: the client's capabilities (2026).
    pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// `_meta` key: the client's name and version (2026).
    pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// `_meta` key of a result: the server's name and version (2026).
    pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// JSON-RPC: method not found (over 2026 streamable HTTP: `404`).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// JSON-RPC: invalid params (a 2026 request's missing or malformed `_meta`).
    pub const INVALID_PARAMS: i64 = -32602;
    /// HeaderMismatch (2026): `MCP-Protocol-Version`, `Mcp-Method` or
    /// `Mcp-Name` missing or not what the body says.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// MissingRequiredClientCapability (2026).
    pub const MISSING_CAPABILITY: i64 = -32021;
    /// UnsupportedProtocolVersion (final 2026 code).
    pub const UNSUPPORTED_VERSION: i64 = -32022;
    /// UnsupportedProtocolVersion in the 2026 drafts.
    pub const UNSUPPORTED_VERSION_DRAFT: i64 = -32004;
}

/// MCP Apps' extension id (`io.modelcontextprotocol/ui`, SPEC §27).
pub const APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The skills extension's id (SEP-2640, SPEC §27).
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The MIME type of an MCP App's HTML resource.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// Whether a tool is for the app only (MCP Apps, SPEC §27): its
/// `_meta.ui.visibility` is present and leaves out `"model"`. Such a tool
/// is passed to the host on the server's own endpoint and stays out of
/// every model-facing list (the aggregate, `find_tools`). A visibility
/// that is no list of strings leaves the model out too: a model-facing
/// list fails closed.
pub fn app_only(tool: &Value) -> bool {
    let Some(visibility) = tool.pointer("/_meta/ui/visibility") else {
        return false;
    };
    if visibility.is_null() {
        return false;
    }
    !visibility
        .as_array()
        .is_some_and(|v| v.iter().any(|x| x.as_str() == Some("model")))
}

/// The protocol era a server was probed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum McpEra {
    /// `2024-11-05` … `2025-11-25`: `initialize`, sessions, `ping`.
    #[serde(rename = "2025")]
    V2025,
    /// `2026-07-28`: stateless, `server/discover`.
    #[serde(rename = "2026")]
    V2026,
}

impl McpEra {
    /// `"2025"` or `"2026"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            McpEra::V2025 => "2025",
            McpEra::V2026 => "2026",
        }
    }
}

impl std::fmt::Display for McpEra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `status.mcp`: what the `mcp` probe learned since the current spawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpStatus {
    /// The protocol version in use (`2026-07-28`, or the one `initialize` agreed).
    pub protocol_version: String,
    /// `"2025"` or `"2026"`.
    pub era: McpEra,
    /// The server's own name, if it gave one.
    pub server_name: Option<String>,
    /// The server's own version, if it gave one.
    pub server_version: Option<String>,
    /// Tools listed after this spawn; `null` if listing failed (or is pending).
    pub tool_count: Option<u32>,
    /// Tool names new since the previous snapshot.
    pub tools_added: Vec<String>,
    /// Tool names gone since the previous snapshot.
    pub tools_removed: Vec<String>,
    /// Tool names whose description, input schema or annotations changed.
    pub tools_changed: Vec<String>,
    /// When the tools were listed (RFC 3339), `null` if listing failed.
    pub listed_at: Option<String>,
}

/// `tools {name}` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsParams {
    /// The server.
    pub name: String,
}

/// `tools {name}` → the newest snapshot, the one before, and what changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsResult {
    /// The server.
    pub name: String,
    /// The newest snapshot, `null` before the first listing.
    pub current: Option<ToolsView>,
    /// The snapshot before it, `null` if there is none.
    pub previous: Option<ToolsView>,
    /// Names in `current` only.
    pub added: Vec<String>,
    /// Names in `previous` only.
    pub removed: Vec<String>,
    /// Names in both whose description, input schema or annotations differ.
    pub changed: Vec<String>,
    /// The firewall mode in force (SPEC §20); `null` from a daemon before it.
    #[serde(default)]
    pub mode: Option<crate::firewall::FirewallMode>,
    /// The current listing's prompts, shown like its tools.
    #[serde(default)]
    pub prompts: Vec<ToolSummary>,
    /// The current listing's pinned resources (skill files, MCP Apps; SPEC
    /// §27), shown like its tools: `name` is the URI, `title` its MIME
    /// type, size and hash, `description` its text.
    #[serde(default)]
    pub resources: Vec<ToolSummary>,
}

/// One snapshot as `tools` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsView {
    /// When it was listed (RFC 3339).
    pub ts: String,
    /// Protocol version of the listing.
    pub protocol_version: String,
    /// Server name at the time.
    pub server_name: Option<String>,
    /// Server version at the time.
    pub server_version: Option<String>,
    /// The tools, in the server's order.
    pub tools: Vec<ToolSummary>,
}

/// One tool (or prompt) as `tools` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// Tool name.
    pub name: String,
    /// Human title, if any.
    pub title: Option<String>,
    /// Description, if any.
    pub description: Option<String>,
    /// [`crate::firewall::digest`] of the object as listed (SPEC §20);
    /// `null` in snapshots from before the firewall.
    #[serde(default)]
    pub digest: Option<String>,
    /// Where it stands; `null` in the `previous` snapshot and in ledgers
    /// from before the firewall.
    #[serde(default)]
    pub state: Option<crate::firewall::ToolState>,
    /// Why it is held back (empty when approved): one sentence each.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// What the user should know that does not hold it back (another
    /// server lists its name with another definition, in `pin` mode): one
    /// sentence each; `[]` when none.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// `inputSchema` as listed (for a review's diff).
    #[serde(default)]
    pub input_schema: Option<Value>,
    /// For a `changed` tool: the version the user approved.
    #[serde(default)]
    pub approved: Option<Box<ApprovedVersion>>,
    /// Calls through xy since the daemon started (SPEC §20); `null` when
    /// none were recorded.
    #[serde(default)]
    pub calls: Option<ToolCallStats>,
}

/// The approved version of a tool whose listing changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovedVersion {
    /// Its digest.
    pub digest: String,
    /// When it was approved (RFC 3339).
    pub approved_at: String,
    /// Its title.
    #[serde(default)]
    pub title: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
    /// Its `inputSchema`.
    #[serde(default)]
    pub input_schema: Option<Value>,
}

/// Per-tool call figures (`xyctl tools <name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallStats {
    /// Calls recorded.
    pub calls: u64,
    /// Of those, tool errors, JSON-RPC errors, held back or child gone.
    pub errors: u64,
    /// Median duration, microseconds.
    pub p50_us: u64,
    /// 99th percentile duration, microseconds.
    pub p99_us: u64,
}

/// `tools_approve {name, tools?, all?}` params: `tools` names the tools
/// (and prompts) to approve; `all` approves every held-back one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsApproveParams {
    /// The server.
    pub name: String,
    /// Tools to approve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Approve every held-back tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// The items as the caller showed them (SPEC §28): exactly these are
    /// approved, in the same step as the server actor checks that it still
    /// lists each with that digest; if one changed, nothing is. Instead of
    /// `tools` and `all`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<ExpectedDigest>,
}

/// One item of `tools_approve {expect}`: its name and the digest shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedDigest {
    /// The tool's or prompt's name, or the resource's URI.
    pub name: String,
    /// Its digest as the caller showed it.
    pub digest: String,
}

/// `data` of a `tools_approve {expect}` refused with `-32008
/// DigestChanged`: nothing was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestChangedData {
    /// The server.
    pub server: String,
    /// The items whose digest is not the one shown.
    pub changed: Vec<ChangedItem>,
}

/// An item listed otherwise than the caller showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedItem {
    /// Its name.
    pub name: String,
    /// The digest the caller showed.
    pub expected: String,
    /// The digests the server lists under that name now (`[]`: it lists
    /// none; a tool and a prompt may share a name).
    pub current: Vec<String>,
}

/// `tools_approve` → the names now approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsApproveResult {
    /// Names approved by this call.
    pub approved: Vec<String>,
}

/// `tools_deny {name, tools}` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsDenyParams {
    /// The server.
    pub name: String,
    /// Tools to deny.
    pub tools: Vec<String>,
}

/// `tools_deny` → the names now denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsDenyResult {
    /// Names denied by this call.
    pub denied: Vec<String>,
}

/// How a call through xy ended (SPEC §20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true`.
    ToolError,
    /// A JSON-RPC error answer.
    RpcError,
    /// Refused by the firewall.
    HeldBack,
    /// The child went away before answering.
    ChildGone,
}

/// One recorded call: never argument values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// When the call arrived (RFC 3339, milliseconds).
    pub ts: String,
    /// The server.
    pub server: String,
    /// The client: `clientInfo.name` (and version), else the User-Agent,
    /// else `null`.
    pub client: Option<String>,
    /// The tool called.
    pub tool: String,
    /// Arrival to answer, microseconds.
    pub duration_us: u64,
    /// How it ended.
    pub outcome: CallOutcome,
}

/// The ledger file `$XDG_STATE_HOME/xy/tools/<name>.json`: the last
/// [`LEDGER_KEEP`] snapshots, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLedger {
    /// File format version ([`LEDGER_FORMAT`]).
    pub format: u32,
    /// Snapshots, oldest first.
    pub snapshots: Vec<ToolSnapshot>,
    /// The firewall's approvals, denials and the latest verdicts (format
    /// 2; empty when read from a format 1 file).
    #[serde(default)]
    pub firewall: FirewallLedger,
    /// The latest listing as xy answers it while the server does not run
    /// (SPEC §26; added to format 2 without a new number, D230: an older
    /// xy reads the file and drops it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<ServedListing>,
    /// The capability gates of a 2025-era child's latest probed listing
    /// (format 4, D280; absent from older files: probed once, as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<ServedGates>,
}

/// The firewall's part of a ledger (SPEC §20): what survives restarts of
/// the server, upgrades of it, and daemon restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirewallLedger {
    /// xy decided a listing of this server before (`pin` approves the
    /// first one). `false` in a format 1 file: its first listing under the
    /// firewall is a first listing.
    #[serde(default)]
    pub seen: bool,
    /// Tools.
    #[serde(default)]
    pub tools: ItemLedger,
    /// Prompts.
    #[serde(default)]
    pub prompts: ItemLedger,
    /// Pinned resources by URI (format 3; empty when read from before).
    #[serde(default)]
    pub resources: ItemLedger,
    /// `skill://` and `ui://` resource templates are pinned (by their
    /// `uriTemplate`, in `resources`) since a listing decided them. Added
    /// to format 3 without a new number: `false` in a file from before,
    /// whose first listing of templates is a first listing (no flags).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub templates_seen: bool,
}

/// Approvals, denials and latest verdicts of one kind of item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemLedger {
    /// The approved version by name.
    #[serde(default)]
    pub approved: std::collections::BTreeMap<String, ApprovedVersion>,
    /// Names the user denied.
    #[serde(default)]
    pub denied: std::collections::BTreeSet<String>,
    /// The latest listing's verdicts, in the server's order.
    #[serde(default)]
    pub current: Vec<ItemVerdict>,
}

/// One listed item as the firewall decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemVerdict {
    /// Its name.
    pub name: String,
    /// Its digest.
    pub digest: String,
    /// Its state.
    pub state: crate::firewall::ToolState,
    /// Why it is held back.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Its title.
    #[serde(default)]
    pub title: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
    /// Its `inputSchema` (tools) or `arguments` (prompts).
    #[serde(default)]
    pub input_schema: Option<CanonicalJson>,
}

impl ItemLedger {
    /// The approvals as a decision needs them.
    pub fn approvals(&self) -> crate::firewall::Approvals {
        crate::firewall::Approvals {
            approved: self
                .approved
                .iter()
                .map(|(k, v)| (k.clone(), v.digest.clone()))
                .collect(),
            denied: self.denied.iter().cloned().collect(),
        }
    }

    /// The `tools` view of the latest verdicts.
    pub fn summaries(&self) -> Vec<ToolSummary> {
        self.current.iter().map(|v| self.summary(v)).collect()
    }

    /// The `tools` view of one verdict: a held-back one that differs from
    /// a version the user approved (`changed`, or `flagged`/`denied` after
    /// a change) carries that version, for the review's diff.
    pub fn summary(&self, v: &ItemVerdict) -> ToolSummary {
        ToolSummary {
            name: v.name.clone(),
            title: v.title.clone(),
            description: v.description.clone(),
            digest: Some(v.digest.clone()),
            state: Some(v.state),
            reasons: v.reasons.clone(),
            warnings: Vec::new(),
            input_schema: v
                .input_schema
                .as_ref()
                .and_then(|c| serde_json::from_str(c.as_str()).ok()),
            approved: (!v.state.visible())
                .then(|| self.approved.get(&v.name))
                .flatten()
                .filter(|a| a.digest != v.digest)
                .map(|a| Box::new(a.clone())),
            calls: None,
        }
    }
}

/// Snapshots kept per server.
pub const LEDGER_KEEP: usize = 10;
/// The ledger file format written. 3: tool digests cover `_meta.ui`, and
/// pinned resources (SPEC §27); a format 2 ledger's approvals migrate at
/// the first listing after it is read (`firewall::Policy::legacy`). 4: the
/// capability gates of a 2025-era child are kept (`gates`, D280); a
/// format 3 file needs no migration (its first listing probes once).
pub const LEDGER_FORMAT: u32 = 4;
/// The first format whose tool digests cover `_meta.ui` (D261): an older
/// file's approvals migrate at its first listing.
pub const DIGEST_UI_FORMAT: u32 = 3;

/// One `tools/list` result (all pages) after one spawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSnapshot {
    /// When it was listed (RFC 3339).
    pub ts: String,
    /// Protocol version of the listing.
    pub protocol_version: String,
    /// Server name at the time.
    pub server_name: Option<String>,
    /// Server version at the time.
    pub server_version: Option<String>,
    /// The tools, in the server's order.
    pub tools: Vec<LedgerTool>,
}

/// One tool as stored: what `changed` compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerTool {
    /// Tool name.
    pub name: String,
    /// Human title.
    #[serde(default)]
    pub title: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// `inputSchema` as the server sent it.
    #[serde(default)]
    pub input_schema: Option<CanonicalJson>,
    /// `annotations` as the server sent it.
    #[serde(default)]
    pub annotations: Option<CanonicalJson>,
}

/// A JSON value kept as its canonical text (compact, object keys sorted)
/// rather than as a [`Value`] tree. A daemon keeps every server's last
/// ten listings: as trees, each schema object costs a whole B-tree node
/// however few keys it has, which adds up fast for a server with many
/// tools; as text it costs its length. Two
/// values are equal exactly when their canonical texts are, so `changed`
/// compares strings. Serialised as the JSON it holds.
#[derive(Debug, Clone)]
pub struct CanonicalJson(Box<serde_json::value::RawValue>);

impl CanonicalJson {
    /// The canonical text of `v`.
    pub fn new(v: &Value) -> CanonicalJson {
        // A `Value`'s maps are sorted (no `preserve_order`), and its
        // compact form has no whitespace: the text is canonical.
        // (Serialising a `Value` cannot fail; the default is `null`.)
        CanonicalJson(serde_json::value::to_raw_value(v).unwrap_or_default())
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for CanonicalJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for CanonicalJson {}

impl From<Value> for CanonicalJson {
    fn from(v: Value) -> Self {
        CanonicalJson::new(&v)
    }
}

impl Serialize for CanonicalJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CanonicalJson {
    /// Through a [`Value`]: a ledger file written pretty (or by an older
    /// xy) compares equal to the same value listed again.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| CanonicalJson::new(&v))
    }
}

impl LedgerTool {
    /// A tool from one entry of a `tools/list` result (`None` without a name).
    pub fn from_wire(tool: &Value) -> Option<LedgerTool> {
        let text = |k: &str| tool.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(LedgerTool {
            name: text("name")?,
            title: text("title").or_else(|| {
                tool.pointer("/annotations/title")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
            description: text("description"),
            input_schema: tool.get("inputSchema").map(CanonicalJson::new),
            annotations: tool.get("annotations").map(CanonicalJson::new),
        })
    }
}

impl ToolSnapshot {
    /// The `tools` view of this snapshot.
    pub fn view(&self) -> ToolsView {
        ToolsView {
            ts: self.ts.clone(),
            protocol_version: self.protocol_version.clone(),
            server_name: self.server_name.clone(),
            server_version: self.server_version.clone(),
            tools: self
                .tools
                .iter()
                .map(|t| ToolSummary {
                    name: t.name.clone(),
                    title: t.title.clone(),
                    description: t.description.clone(),
                    ..ToolSummary::default()
                })
                .collect(),
        }
    }
}

/// What changed from `previous` to `current`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDiff {
    /// In `current` only, in its order.
    pub added: Vec<String>,
    /// In `previous` only, in its order.
    pub removed: Vec<String>,
    /// In both, with a different description, input schema or annotations.
    pub changed: Vec<String>,
}

/// Compares two snapshots' tools by name. Without a previous snapshot
/// nothing is compared, so nothing is reported as changed (a first start
/// is not "every tool added").
pub fn diff_tools(previous: Option<&[LedgerTool]>, current: &[LedgerTool]) -> ToolDiff {
    let Some(previous) = previous else {
        return ToolDiff::default();
    };
    let find = |list: &[LedgerTool], name: &str| list.iter().position(|t| t.name == name);
    let mut d = ToolDiff::default();
    for t in current {
        match find(previous, &t.name) {
            None => d.added.push(t.name.clone()),
            Some(i) => {
                let p = &previous[i];
                if p.description != t.description
                    || p.input_schema != t.input_schema
                    || p.annotations != t.annotations
                {
                    d.changed.push(t.name.clone());
                }
            }
        }
    }
    d.removed = previous
        .iter()
        .filter(|p| find(current, &p.name).is_none())
        .map(|p| p.name.clone())
        .collect();
    d
}

impl ToolLedger {
    /// Appends a snapshot, keeping the newest [`LEDGER_KEEP`].
    pub fn push(&mut self, snapshot: ToolSnapshot) {
        self.format = LEDGER_FORMAT;
        self.snapshots.push(snapshot);
        let excess = self.snapshots.len().saturating_sub(LEDGER_KEEP);
        self.snapshots.drain(..excess);
    }

    /// The `tools` result for server `name`.
    pub fn result(&self, name: &str) -> ToolsResult {
        let n = self.snapshots.len();
        let current = n.checked_sub(1).map(|i| &self.snapshots[i]);
        let previous = n.checked_sub(2).map(|i| &self.snapshots[i]);
        let d = match current {
            Some(c) => diff_tools(previous.map(|p| p.tools.as_slice()), &c.tools),
            None => ToolDiff::default(),
        };
        let fw = &self.firewall.tools;
        let current_view = current.map(|c| {
            let mut view = c.view();
            for t in &mut view.tools {
                if let Some(v) = fw.current.iter().find(|v| v.name == t.name) {
                    let s = fw.summary(v);
                    t.digest = s.digest;
                    t.state = s.state;
                    t.reasons = s.reasons;
                    t.input_schema = s.input_schema;
                    t.approved = s.approved;
                }
            }
            view
        });
        ToolsResult {
            name: name.to_owned(),
            current: current_view,
            previous: previous.map(ToolSnapshot::view),
            added: d.added,
            removed: d.removed,
            changed: d.changed,
            mode: None,
            prompts: self.firewall.prompts.summaries(),
            resources: self.firewall.resources.summaries(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn app_only_means_a_visibility_without_the_model() {
        let tool = |meta: Value| json!({"name": "t", "_meta": meta});
        assert!(!app_only(&json!({"name": "t"})));
        assert!(!app_only(&tool(json!({"ui": {"resourceUri": "ui://a"}}))));
        assert!(!app_only(&tool(
            json!({"ui": {"visibility": ["model", "app"]}})
        )));
        assert!(!app_only(&tool(json!({"ui": {"visibility": ["model"]}}))));
        assert!(app_only(&tool(json!({"ui": {"visibility": ["app"]}}))));
        assert!(app_only(&tool(json!({"ui": {"visibility": []}}))));
        assert!(
            app_only(&tool(json!({"ui": {"visibility": "app"}}))),
            "fails closed"
        );
    }

    #[test]
    fn a_held_back_item_that_differs_from_its_approved_version_carries_it() {
        use crate::firewall::ToolState;
        let verdict = |digest: &str, state| ItemVerdict {
            name: "read".into(),
            digest: digest.into(),
            state,
            reasons: vec![],
            title: None,
            description: Some("Reads.".into()),
            input_schema: None,
        };
        let mut l = ItemLedger::default();
        l.approved.insert(
            "read".into(),
            ApprovedVersion {
                digest: "old".into(),
                approved_at: "2026-12-01T00:00:00.000Z".into(),
                title: None,
                description: Some("Reads a file.".into()),
                input_schema: None,
            },
        );
        for (digest, state, carries) in [
            ("new", ToolState::Changed, true),
            ("new", ToolState::Flagged, true),
            ("old", ToolState::Flagged, false),
            ("old", ToolState::Approved, false),
        ] {
            let s = l.summary(&verdict(digest, state));
            assert_eq!(s.approved.is_some(), carries, "{digest} {state:?}");
        }
    }

    fn tool(name: &str, description: &str) -> LedgerTool {
        LedgerTool {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema: Some(json!({"type": "object"}).into()),
            annotations: None,
        }
    }

    fn snap(ts: &str, tools: Vec<LedgerTool>) -> ToolSnapshot {
        ToolSnapshot {
            ts: ts.into(),
            protocol_version: "2026-07-28".into(),
            server_name: Some("s".into()),
            server_version: Some("1".into()),
            tools,
        }
    }

    #[test]
    fn status_mcp_wire_shape() {
        let s = McpStatus {
            protocol_version: "2026-07-28".into(),
            era: McpEra::V2026,
            server_name: Some("insikt".into()),
            server_version: Some("0.4.1".into()),
            tool_count: Some(3),
            tools_added: vec!["search".into()],
            tools_removed: vec![],
            tools_changed: vec!["index".into()],
            listed_at: Some("2026-11-30T05:06:59.001Z".into()),
        };
        let want = json!({
            "protocol_version": "2026-07-28", "era": "2026",
            "server_name": "insikt", "server_version": "0.4.1",
            "tool_count": 3, "tools_added": ["search"], "tools_removed": [],
            "tools_changed": ["index"], "listed_at": "2026-11-30T05:06:59.001Z"
        });
        assert_eq!(serde_json::to_value(&s).unwrap(), want);
        assert_eq!(serde_json::from_value::<McpStatus>(want).unwrap(), s);
        let failed = McpStatus {
            era: McpEra::V2025,
            tool_count: None,
            listed_at: None,
            ..s
        };
        let v = serde_json::to_value(&failed).unwrap();
        assert_eq!(
            (
                v["era"].clone(),
                v["tool_count"].clone(),
                v["listed_at"].clone()
            ),
            (json!("2025"), Value::Null, Value::Null)
        );
    }

    #[test]
    fn tools_result_wire_shape_and_diff() {
        let mut ledger = ToolLedger::default();
        assert_eq!(
            serde_json::to_value(ledger.result("a")).unwrap(),
            json!({"name": "a", "current": null, "previous": null,
                   "added": [], "removed": [], "changed": [], "mode": null, "prompts": [],
                   "resources": []})
        );
        ledger.push(snap(
            "t1",
            vec![tool("echo", "Echo"), tool("gone", "G"), tool("same", "S")],
        ));
        ledger.push(snap(
            "t2",
            vec![tool("same", "S"), tool("echo", "Echo v2"), tool("new", "N")],
        ));
        let r = ledger.result("a");
        // SPEC §6: every key present, even where a snapshot has no verdict.
        let t = |name: &str, description: &str| {
            json!({"name": name, "title": null, "description": description,
                   "digest": null, "state": null, "reasons": [], "warnings": [], "input_schema": null,
                   "approved": null, "calls": null})
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({
                "name": "a",
                "current": {"ts": "t2", "protocol_version": "2026-07-28", "server_name": "s",
                    "server_version": "1", "tools": [
                        t("same", "S"),
                        t("echo", "Echo v2"),
                        t("new", "N")]},
                "previous": {"ts": "t1", "protocol_version": "2026-07-28", "server_name": "s",
                    "server_version": "1", "tools": [
                        t("echo", "Echo"),
                        t("gone", "G"),
                        t("same", "S")]},
                "added": ["new"], "removed": ["gone"], "changed": ["echo"],
                "mode": null, "prompts": [], "resources": []
            })
        );
        let back: ToolsResult = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn schema_and_annotation_changes_count_and_a_first_listing_reports_nothing() {
        let a = tool("t", "d");
        let mut b = a.clone();
        b.input_schema = Some(json!({"type": "object", "properties": {"x": {}}}).into());
        assert_eq!(
            diff_tools(Some(std::slice::from_ref(&a)), &[b]).changed,
            ["t"]
        );
        let mut c = a.clone();
        c.annotations = Some(json!({"readOnlyHint": true}).into());
        assert_eq!(
            diff_tools(Some(std::slice::from_ref(&a)), &[c]).changed,
            ["t"]
        );
        let mut d = a.clone();
        d.title = Some("T".into());
        assert_eq!(
            diff_tools(Some(std::slice::from_ref(&a)), &[d]),
            ToolDiff::default()
        );
        assert_eq!(diff_tools(None, &[a]), ToolDiff::default());
    }

    #[test]
    fn canonical_json_round_trips_and_ignores_key_order_and_layout() {
        let wire = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let c = CanonicalJson::new(&wire);
        assert_eq!(
            c.as_str(),
            r#"{"properties":{"q":{"type":"string"}},"type":"object"}"#
        );
        assert_eq!(serde_json::from_str::<Value>(c.as_str()).unwrap(), wire);
        // A ledger file written pretty, keys in another order, reads back
        // equal to the same schema listed again: no spurious `changed`.
        let pretty =
            "{\n  \"type\": \"object\",\n  \"properties\": {\"q\": {\"type\": \"string\"}}\n}";
        let back: CanonicalJson = serde_json::from_str(pretty).unwrap();
        assert_eq!(back, c);
        let t = LedgerTool {
            input_schema: Some(c.clone()),
            ..tool("search", "Search")
        };
        let text = serde_json::to_string_pretty(&t).unwrap();
        assert_eq!(serde_json::from_str::<LedgerTool>(&text).unwrap(), t);
        assert_eq!(
            serde_json::to_value(&t).unwrap()["input_schema"],
            wire,
            "written as the JSON it holds, not as a string"
        );
    }

    #[test]
    fn ledger_keeps_the_last_ten() {
        let mut ledger = ToolLedger::default();
        for i in 0..13 {
            ledger.push(snap(&format!("t{i}"), vec![]));
        }
        assert_eq!(ledger.snapshots.len(), LEDGER_KEEP);
        assert_eq!(ledger.snapshots[0].ts, "t3");
        assert_eq!(ledger.format, LEDGER_FORMAT);
    }

    #[test]
    fn wire_tool_parsing() {
        let t = LedgerTool::from_wire(&json!({"name": "x", "description": "d",
            "inputSchema": {"type": "object"}, "annotations": {"title": "X"}}))
        .unwrap();
        assert_eq!(t.title.as_deref(), Some("X"));
        assert!(LedgerTool::from_wire(&json!({"description": "no name"})).is_none());
    }
}
