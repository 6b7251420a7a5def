//! What `status` shows of a pinned install (SPEC §22): the package the
//! server file names and when that version was installed.

use serde::{Deserialize, Serialize};

/// `status.package`: the `package "…"` node and its install record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageStatus {
    /// `npm` or `pypi`.
    pub ecosystem: String,
    /// The package (`@scope/name`, a PyPI project).
    pub name: String,
    /// The exact version the config pins.
    pub version: String,
    /// When that version was installed (RFC 3339 UTC), from the
    /// `xy-install.json` the installer wrote; `null` when the version
    /// directory or its record is missing (the server cannot start then).
    pub installed_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape_is_pinned() {
        let s = PackageStatus {
            ecosystem: "npm".into(),
            name: "@modelcontextprotocol/server-memory".into(),
            version: "2026.8.31".into(),
            installed_at: None,
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"ecosystem": "npm", "name": "@modelcontextprotocol/server-memory",
                "version": "2026.8.31", "installed_at": null})
        );
        assert_eq!(serde_json::from_value::<PackageStatus>(v).unwrap(), s);
    }
}
