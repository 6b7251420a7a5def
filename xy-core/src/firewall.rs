//! The tool firewall's vocabulary (SPEC §20): the modes, the states a tool
//! can be in, and the digest that says whether a tool is the one the user
//! approved. Pure data and functions: the ledger that keeps approvals is
//! `xy-actors`' and the enforcement is the bridge's and the gateway's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a server's tools are let through (`firewall { mode … }`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FirewallMode {
    /// What a server lists the first time xy sees it is approved; a tool
    /// added later, or one whose digest changed, is held back.
    #[default]
    Pin,
    /// Every tool is held back until the user approves it.
    Review,
    /// Nothing is held back (the scan does not run either).
    Off,
}

impl FirewallMode {
    /// The word the config and the protocol use.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pin => "pin",
            Self::Review => "review",
            Self::Off => "off",
        }
    }

    /// Parses the config's word; `None` for anything else.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "pin" => Some(Self::Pin),
            "review" => Some(Self::Review),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

/// Where one tool (or prompt) stands (method `tools`, SPEC §20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolState {
    /// Visible to clients.
    Approved,
    /// New and not yet approved: held back.
    Pending,
    /// Its digest differs from the approved one: held back.
    Changed,
    /// The scan found something in it: held back (in every mode but `off`).
    Flagged,
    /// The user denied it: held back until approved.
    Denied,
}

impl ToolState {
    /// Whether clients see the tool.
    pub const fn visible(self) -> bool {
        matches!(self, Self::Approved)
    }
}

/// The invisible and direction-changing characters SPEC §20 names: text
/// holding one can read differently to the model than to the user.
pub const HIDDEN_CHARS: [std::ops::RangeInclusive<char>; 6] = [
    '\u{200B}'..='\u{200F}',
    '\u{202A}'..='\u{202E}',
    '\u{2060}'..='\u{2064}',
    '\u{2066}'..='\u{2069}',
    '\u{FEFF}'..='\u{FEFF}',
    '\u{E0000}'..='\u{E007F}',
];

/// Whether `c` is one of [`HIDDEN_CHARS`].
pub fn is_hidden(c: char) -> bool {
    HIDDEN_CHARS.iter().any(|r| r.contains(&c))
}

/// The digest of a tool or prompt object: SHA-256, lowercase hex, of the
/// RFC 8785 canonical JSON of the object without its `_meta` member.
/// `_meta` is left out because servers put volatile things there (trace
/// ids, timestamps) that say nothing about what the model reads.
pub fn digest(object: &Value) -> String {
    use sha2::{Digest, Sha256};
    let canonical = match object {
        Value::Object(map) if map.contains_key("_meta") => {
            let mut map = map.clone();
            map.remove("_meta");
            canonical(&Value::Object(map))
        }
        other => canonical(other),
    };
    let sum = Sha256::digest(canonical.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in sum {
        use std::fmt::Write;
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// RFC 8785 canonical JSON of a value.
pub fn canonical(value: &Value) -> String {
    // A `serde_json::Value` always serialises (its keys are strings), and
    // the canonicaliser fails only for values serde cannot write.
    serde_json_canonicalizer::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_ignores_key_order_whitespace_and_meta() {
        let a = json!({"name": "echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}});
        let b: Value = serde_json::from_str(
            r#"{ "inputSchema": {"properties": {"x": {"type":"string"}}, "type":"object"},
                 "description": "Echo", "name": "echo", "_meta": {"trace": "abc"} }"#,
        )
        .unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_eq!(digest(&a).len(), 64);
        assert!(
            digest(&a)
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
    }

    #[test]
    fn the_digest_changes_with_any_text_the_model_reads() {
        let a = json!({"name": "echo", "description": "Echo"});
        let b = json!({"name": "echo", "description": "Echo."});
        let c = json!({"name": "echo", "description": "Echo", "title": "E"});
        assert_ne!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
    }

    #[test]
    fn the_digest_is_sha256_of_rfc8785() {
        // Worked by hand: canonical form `{"a":1,"b":"x"}`.
        let v = json!({"b": "x", "a": 1.0});
        assert_eq!(canonical(&v), r#"{"a":1,"b":"x"}"#);
        // sha256(`{"a":1,"b":"x"}`), from `printf '%s' '{"a":1,"b":"x"}' | sha256sum`.
        assert_eq!(
            digest(&v),
            "ecf9e98ec0641e23113ff3ce8bdc78d0ddd249886517fd4a7f68cc83d4e65667"
        );
    }

    #[test]
    fn hidden_chars_are_the_spec_ranges() {
        for c in [
            '\u{200B}',
            '\u{200F}',
            '\u{202A}',
            '\u{2064}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{E0041}',
        ] {
            assert!(is_hidden(c), "{c:?}");
        }
        for c in ['a', ' ', '\u{2010}', '\u{2065}', '\u{E0080}', 'é'] {
            assert!(!is_hidden(c), "{c:?}");
        }
    }

    #[test]
    fn modes_and_states_use_the_spec_words() {
        for m in [FirewallMode::Pin, FirewallMode::Review, FirewallMode::Off] {
            assert_eq!(FirewallMode::parse(m.as_str()), Some(m));
            assert_eq!(serde_json::to_value(m).unwrap(), json!(m.as_str()));
        }
        assert_eq!(FirewallMode::parse("strict"), None);
        assert_eq!(
            serde_json::to_value(ToolState::Changed).unwrap(),
            json!("changed")
        );
        assert!(ToolState::Approved.visible() && !ToolState::Flagged.visible());
    }
}
