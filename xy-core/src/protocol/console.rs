//! `console_code` (SPEC §28): the one-time code `xyctl ui` hands the
//! browser in the console URL's fragment.

use serde::{Deserialize, Serialize};

/// How long a one-time code may wait to be exchanged, at most.
pub const CONSOLE_CODE_TTL_SECS: u64 = 60;

/// Result of `console_code`: where the console is and the code that logs
/// one page in, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleCodeResult {
    /// `http://127.0.0.1:<port>/`: the console's origin (no secret).
    pub url: String,
    /// The one-time code; it travels only in the URL's fragment, which a
    /// browser never sends to a server.
    pub code: String,
    /// Seconds the code stays valid.
    pub expires_in_secs: u64,
}

impl ConsoleCodeResult {
    /// The URL `xyctl ui` opens: the origin, and the code in the fragment.
    pub fn login_url(&self) -> String {
        format!("{}#code={}", self.url, self.code)
    }
}

/// `clients` → every AI client's config file found on this machine (in the
/// daemon's `$HOME`), and what each entry uses (SPEC §14, §28).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientsResult {
    /// The files found, in SPEC order of the clients.
    pub clients: Vec<ClientFile>,
}

/// One client's config file as found (`xyctl clients --json`, the
/// console's Clients page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientFile {
    /// The client's SPEC id.
    pub client: String,
    /// Its file.
    pub file: String,
    /// Why the file could not be read, if it could not.
    pub error: Option<String>,
    /// Its server entries.
    pub entries: Vec<ClientEntry>,
}

/// One entry of a client's file and what it uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientEntry {
    /// The entry's name.
    pub name: String,
    /// `xy` (an xy server, or xy itself), `aggregate` (`/mcp`, a profile's
    /// endpoint), `process` (spawns its own), `url` (some other URL),
    /// `other`.
    pub uses: String,
    /// The xy server it points at, or the one that stands for it.
    pub xy_server: Option<String>,
    /// For `aggregate`: the endpoint's path (`/mcp`, `/p/<profile>/mcp`);
    /// `null` otherwise (SPEC §6: every key of a result is present).
    #[serde(default)]
    pub endpoint: Option<String>,
}
