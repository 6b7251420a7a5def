//! What a server last said about itself and listed, kept in its ledger
//! file so that xy can answer a client's session start for the server
//! while no child runs (SPEC §26): the child's answer to xy's handshake
//! and every listed item as the child wrote it. Which items a client may
//! see is the firewall's verdicts' business, decided when answering.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The most bytes of item texts a ledger keeps for answering: a server
/// whose listing is larger is started for its lists, as before (the
/// ledger file stays small enough to read at every daemon start).
pub const SERVED_MAX_BYTES: usize = 4 << 20;

/// The most tools a ledger keeps gates for (D280): a listing with more
/// is probed again at each daemon start, as before gates were kept.
pub const GATES_MAX: usize = 10_000;

/// What a 2025-era child offers only to clients of some capability, as
/// xy's listing probes learnt it for one listing (D210, D280): kept so
/// that a daemon start and an idle child's first wake need no probe, and
/// so that the ledger answers a client with the tools it may call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedGates {
    /// The listing they were learnt from: a SHA-256 over its tools'
    /// names and digests. Another listing is probed again.
    pub listing: String,
    /// Tool → the capabilities a client must have declared (`roots`,
    /// `sampling`, `sampling.tools`, `elicitation.url`, …); a tool not
    /// named needs none.
    #[serde(default)]
    pub needs: std::collections::BTreeMap<String, Vec<String>>,
}

/// One JSON value kept as the text it was written in (key order and
/// numbers as the child wrote them). Two are equal when their texts are.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<RawValue>);

impl RawJson {
    /// `text`, when it is one JSON value.
    pub fn parse(text: &str) -> Option<RawJson> {
        RawValue::from_string(text.trim().to_owned())
            .ok()
            .map(RawJson)
    }

    /// `v`'s compact text.
    pub fn of(v: &serde_json::Value) -> RawJson {
        RawJson(serde_json::value::to_raw_value(v).unwrap_or_default())
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RawJson {}

/// A server's last listing as xy can serve it without the server
/// (ledger field `served`, absent from ledgers written before it: such a
/// server is started for its lists until its next listing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedListing {
    /// When xy listed it (RFC 3339).
    pub listed_at: String,
    /// The child's `initialize` result (a 2025-era child).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialize: Option<RawJson>,
    /// The child's `server/discover` result (a 2026-only child).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<RawJson>,
    /// Every protocol version the child said it supports.
    #[serde(default)]
    pub versions: Vec<String>,
    /// Every listed tool, in the child's order.
    #[serde(default)]
    pub tools: Vec<RawJson>,
    /// Every listed prompt; `None`: the child offers no prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Vec<RawJson>>,
    /// Every listed resource; `None`: not listed by xy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<RawJson>>,
    /// Every listed resource template; `None`: not listed by xy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_templates: Option<Vec<RawJson>>,
    /// Every `skills/list` entry (SEP-2640); `None`: the child does not
    /// declare the skills extension (or a ledger from before D282).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<RawJson>>,
}

impl ServedListing {
    /// Bytes of the item texts and handshake answers kept.
    pub fn size(&self) -> usize {
        let items =
            |v: &Option<Vec<RawJson>>| v.iter().flatten().map(|t| t.as_str().len()).sum::<usize>();
        self.tools.iter().map(|t| t.as_str().len()).sum::<usize>()
            + items(&self.prompts)
            + items(&self.resources)
            + items(&self.resource_templates)
            + items(&self.skills)
            + self.initialize.as_ref().map_or(0, |t| t.as_str().len())
            + self.discover.as_ref().map_or(0, |t| t.as_str().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_kept_as_written_and_absent_lists_are_left_out() {
        let s = ServedListing {
            listed_at: "t".into(),
            initialize: RawJson::parse(r#"{"protocolVersion":"2025-11-25","capabilities":{}}"#),
            tools: vec![
                RawJson::parse(r#"{"name":"b","description":"B","inputSchema":{"type":"object"}}"#)
                    .unwrap(),
            ],
            ..ServedListing::default()
        };
        let text = serde_json::to_string_pretty(&s).unwrap();
        // Key order as the child wrote it (not sorted), inside a pretty file.
        assert!(text.contains(r#"{"name":"b","description":"B","inputSchema":{"type":"object"}}"#));
        assert!(!text.contains("prompts") && !text.contains("discover"));
        let back: ServedListing = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        assert!(s.size() > 50);
        assert!(RawJson::parse("{not json").is_none());
    }
}
