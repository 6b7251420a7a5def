//! What `status` shows of a server's secrets (SPEC §16): each secret's name
//! and the kind of its source, never a value nor where exactly it lives.

use serde::{Deserialize, Serialize};

/// One `secrets { NAME … }` entry as `status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretInfo {
    /// The environment variable the server gets.
    pub name: String,
    /// `command`, `keychain` or `file`.
    pub source: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape_is_pinned() {
        let s = SecretInfo {
            name: "GITHUB_TOKEN".into(),
            source: "keychain".into(),
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "GITHUB_TOKEN", "source": "keychain"})
        );
        assert_eq!(serde_json::from_value::<SecretInfo>(v).unwrap(), s);
    }
}
