//! The daemon's own settings (SPEC §20): `$XDG_CONFIG_HOME/xy/xy.kdl`,
//! optional, with the gateway's port, the daemon-wide firewall mode and
//! xy's OAuth Client ID Metadata Document URL.
//! The types live here; the KDL walk is `parse/settings.rs`, so its
//! mistakes are diagnosed exactly like a server file's, and reading the
//! file is `load.rs`.

use crate::firewall::FirewallMode;

/// The gateway's port when `xy.kdl` does not set one.
pub const DEFAULT_GATEWAY_PORT: u16 = 8399;

/// Everything `xy.kdl` sets; [`DaemonSettings::default`] when the file is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DaemonSettings {
    /// `gateway { … }`.
    pub gateway: GatewaySettings,
    /// `firewall { mode … }`: every server's mode unless its own file sets one.
    pub firewall_default: FirewallMode,
    /// `min-age "3d"` (SPEC §22): how long a version must have been
    /// published before `xyctl add`/`upgrade` installs it; `None`:
    /// [`crate::package::DEFAULT_MIN_AGE`]. Read by `xyctl` only.
    pub min_age: Option<std::time::Duration>,
    /// `oauth-client-metadata-url "https://…"` (SPEC §23, SEP-991): xy's
    /// Client ID Metadata Document, offered to authorization servers that
    /// support it; `None`: xy has none and registers dynamically (D120).
    /// Read when the daemon starts (the broker is built once).
    pub oauth_client_metadata_url: Option<String>,
    /// `search { model "/abs/path" }` (SPEC §26): a static-embedding model
    /// (a directory with `model.safetensors` and `tokenizer.json`, or the
    /// `.safetensors` file) that tool search fuses with BM25; `None`: BM25
    /// only. See `docs/search.md`.
    pub search_model: Option<std::path::PathBuf>,
}

impl DaemonSettings {
    /// The defaults with the gateway off (`gateway { port 0 }`): what an
    /// engine embedded in tests or benches runs with, since the default
    /// port is one per machine.
    pub fn without_gateway() -> Self {
        DaemonSettings {
            gateway: GatewaySettings { port: 0 },
            ..DaemonSettings::default()
        }
    }
}

/// `gateway { port 8399 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GatewaySettings {
    /// `port`: the gateway listens on `127.0.0.1:<port>`; `0` turns it off.
    pub port: u16,
}

impl GatewaySettings {
    /// The port, or `None` when the gateway is off.
    pub fn port(&self) -> Option<u16> {
        (self.port != 0).then_some(self.port)
    }
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            port: DEFAULT_GATEWAY_PORT,
        }
    }
}

/// The gateway's URL of server `name`: `http://127.0.0.1:<port>/<name>/mcp`.
pub fn gateway_url(port: u16, name: &str) -> String {
    format!("http://127.0.0.1:{port}/{name}/mcp")
}
