//! The daemon's own settings (SPEC §20): `$XDG_CONFIG_HOME/xy/xy.kdl`,
//! optional, with the gateway's port, the daemon-wide firewall mode and
//! xy's OAuth Client ID Metadata Document URL.
//! The types live here; the KDL walk is `parse/settings.rs`, so its
//! mistakes are diagnosed exactly like a server file's.

use std::path::Path;

use crate::firewall::FirewallMode;

use super::ConfigErrors;
use super::diagnostic::{ConfigDiagnostic, DiagnosticKind};
use super::parse::settings::PortAt;

/// The gateway's port when `xy.kdl` does not set one.
pub const DEFAULT_GATEWAY_PORT: u16 = 8399;

/// The file's name inside `$XDG_CONFIG_HOME/xy/`.
pub const SETTINGS_FILE: &str = "xy.kdl";

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

/// Parses the text of a settings file (`file` names it in diagnostics).
pub fn parse_settings(file: &Path, src: &str) -> Result<DaemonSettings, ConfigErrors> {
    parse_at(file, src).map(|(s, _)| s)
}

fn parse_at(file: &Path, src: &str) -> Result<(DaemonSettings, Option<PortAt>), ConfigErrors> {
    let (settings, diags, at) = super::parse::settings::parse(file, src);
    if diags.is_empty() {
        Ok((settings, at))
    } else {
        Err(ConfigErrors::new(diags))
    }
}

/// Loads `file`: absent is [`DaemonSettings::default`]; unreadable, not UTF-8 or
/// invalid is every error found.
pub fn load_settings(file: &Path) -> Result<DaemonSettings, ConfigErrors> {
    load_settings_at(file).map(|(s, _)| s)
}

/// [`load_settings`], and where the file sets the gateway port.
pub(super) fn load_settings_at(
    file: &Path,
) -> Result<(DaemonSettings, Option<PortAt>), ConfigErrors> {
    let io = |message: String| {
        ConfigErrors::new(vec![ConfigDiagnostic::new(
            DiagnosticKind::Io,
            file,
            message,
        )])
    };
    match std::fs::read(file) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => parse_at(file, &text),
            Err(_) => Err(ConfigErrors::new(vec![
                ConfigDiagnostic::new(
                    DiagnosticKind::Io,
                    file,
                    format!("cannot read {}: not valid UTF-8", file.display()),
                )
                .with_help("save the file as UTF-8"),
            ])),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((DaemonSettings::default(), None)),
        Err(e) => Err(io(format!("cannot read {}: {e}", file.display()))),
    }
}
