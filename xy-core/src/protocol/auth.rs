//! OAuth on the wire (SPEC §23): `auth_login`, `auth_login_wait`,
//! `auth_status`, `auth_logout`. Nothing here ever carries a token: a login
//! hands out the authorization URL (which holds only the PKCE challenge and
//! the state) and reports the grant's issuer, scopes and expiry.

use serde::{Deserialize, Serialize};

/// `auth_login {name}` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthLoginParams {
    /// The remote server to log in to.
    pub name: String,
}

/// `auth_login` → a login waiting for the browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthLoginResult {
    /// The server.
    pub name: String,
    /// Names this login for `auth_login_wait`.
    pub login_id: String,
    /// Where the user's browser goes (the authorization server's page).
    pub url: String,
    /// The loopback address the authorization server redirects back to,
    /// bound for this login only (`http://127.0.0.1:<port>/callback`).
    pub redirect_uri: String,
    /// When the login is given up if the browser never comes back (RFC 3339).
    pub expires_at: String,
    /// How the client id was obtained: `preregistered`, `metadata_document`
    /// (a Client ID Metadata Document URL) or `dynamic_registration`.
    pub client_id_kind: ClientIdKind,
}

/// How xy identified itself to the authorization server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientIdKind {
    /// `client-id` from the server's `auth { }` block.
    Preregistered,
    /// The Client ID Metadata Document URL (the AS advertises support).
    MetadataDocument,
    /// RFC 7591 dynamic client registration.
    DynamicRegistration,
}

/// `auth_login_wait {login_id, timeout_ms?}` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthLoginWaitParams {
    /// From [`AuthLoginResult::login_id`].
    pub login_id: String,
    /// How long to wait before answering `done: false` (default 60 000,
    /// at most 600 000); the login itself keeps waiting until it expires.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `auth_login_wait` → the outcome, or `done: false` when the wait timed
/// out first (call again). A failed login is an error (`-32007`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthLoginWaitResult {
    /// Whether the login finished.
    pub done: bool,
    /// The grant, once `done`.
    pub grant: Option<AuthGrantInfo>,
}

/// What is known about a grant, never the tokens themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthGrantInfo {
    /// The authorization server that issued it.
    pub issuer: Option<String>,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When the access token expires (RFC 3339); `null`: not said.
    pub expires_at: Option<String>,
    /// Whether a refresh token is held (the grant outlives the access token).
    pub refreshable: bool,
}

/// `auth_status {name?}` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthStatusParams {
    /// One server; absent: every server with `auth { oauth }`.
    #[serde(default)]
    pub name: Option<String>,
}

/// `auth_status` → one entry per OAuth server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStatusResult {
    /// Sorted by name.
    pub servers: Vec<AuthStatusEntry>,
}

/// One server's grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStatusEntry {
    /// The server.
    pub name: String,
    /// The MCP endpoint the grant is for.
    pub url: String,
    /// `logged_in`, `not_logged_in` or `login_needed`.
    pub state: AuthState,
    /// The grant, when `logged_in` (and the last one known when `login_needed`).
    pub grant: Option<AuthGrantInfo>,
    /// Why a login is needed (refresh refused, scope step-up), safe to show.
    pub reason: Option<String>,
    /// Scopes the server asked for beyond the grant (`insufficient_scope`);
    /// the next login asks for them too.
    pub missing_scopes: Vec<String>,
    /// A login in progress (`auth_login` not yet completed).
    pub login_pending: bool,
    /// Where the grant is kept, in words (`file store <dir>`, `Secret
    /// Service (…)`, `macOS keychain (…)`); never its content.
    #[serde(default)]
    pub store: String,
}

/// A server's OAuth state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthState {
    /// A grant is held and usable.
    LoggedIn,
    /// No grant.
    NotLoggedIn,
    /// The grant stopped working (refresh refused, more scopes needed):
    /// `xyctl auth login <name>`.
    LoginNeeded,
}

impl AuthState {
    /// The words `xyctl auth status` prints.
    pub const fn label(self) -> &'static str {
        match self {
            AuthState::LoggedIn => "logged in",
            AuthState::NotLoggedIn => "not logged in",
            AuthState::LoginNeeded => "login needed",
        }
    }
}

/// `auth_logout {name}` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthLogoutParams {
    /// The server.
    pub name: String,
}

/// `auth_logout` → whether a grant was forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthLogoutResult {
    /// The server.
    pub name: String,
    /// `false`: there was no grant (idempotent).
    pub logged_out: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_with_every_key() {
        let r = AuthStatusResult {
            servers: vec![AuthStatusEntry {
                name: "linear".into(),
                url: "https://mcp.linear.app/mcp".into(),
                state: AuthState::LoginNeeded,
                grant: None,
                reason: Some("refresh refused".into()),
                missing_scopes: vec![],
                login_pending: false,
                store: "file store /home/u/.local/state/xy/auth".into(),
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["servers"][0]["state"], "login_needed");
        assert!(v["servers"][0].get("grant").is_some());
        assert_eq!(serde_json::from_value::<AuthStatusResult>(v).unwrap(), r);
    }

    #[test]
    fn wait_params_refuse_unknown_fields() {
        let e = serde_json::from_str::<AuthLoginWaitParams>(r#"{"login_id":"a","token":1}"#)
            .unwrap_err();
        assert!(e.to_string().contains("token"), "{e}");
    }
}
