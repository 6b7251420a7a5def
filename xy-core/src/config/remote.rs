//! A remote server's config (SPEC §23): the `url`, the static
//! `headers { … }` and the `auth { oauth … }` block, as the config parser
//! (`parse/remote.rs`) produces them and `xy-actors` (the remote upstream,
//! the OAuth broker) consumes them, and what `status` shows of them
//! ([`RemoteStatus`], a wire type of `protocol`).

use super::SecretSpec;
use crate::protocol::{RemoteHeader, RemoteStatus};

/// A `url "https://…"` server: no process; xy forwards to `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The MCP endpoint as written: `https://…`, or `http://…` for a
    /// loopback host only.
    pub url: String,
    /// `headers { Name "value" }` / `headers { Name secret="NAME" }`, in
    /// file order, added to every upstream request.
    pub headers: Vec<HeaderSpec>,
    /// `auth { oauth … }`; `None`: no OAuth (static headers only, or none).
    pub auth: Option<OAuthConfig>,
}

/// One static upstream header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderSpec {
    /// The header name as written (`Authorization`).
    pub name: String,
    /// Where its value comes from.
    pub value: HeaderValueSpec,
}

/// A static header's value.
#[derive(Clone, PartialEq, Eq)]
pub enum HeaderValueSpec {
    /// Written in the file (not a credential: a file is not a secret store).
    Literal(String),
    /// `secret="NAME"`: the value of the §16 secret `NAME` of the same
    /// server's `secrets { … }` block, as it is (`Bearer …` included).
    Secret(String),
}

/// A literal may still be sensitive; `Debug` shows only the secret's name.
impl std::fmt::Debug for HeaderValueSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderValueSpec::Literal(_) => f.write_str("Literal(<hidden>)"),
            HeaderValueSpec::Secret(name) => f.debug_tuple("Secret").field(name).finish(),
        }
    }
}

/// `auth { oauth; scopes "a" "b"; client-id "…"; client-secret secret="NAME" }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthConfig {
    /// Scopes asked for at login (empty: what the resource metadata lists).
    pub scopes: Vec<String>,
    /// A pre-registered client id; `None`: Client ID Metadata Document or
    /// dynamic registration.
    pub client_id: Option<String>,
    /// `client-secret secret="NAME"` (D149): the §16 secret of the same
    /// file's `secrets { }` holding a confidential client's secret, looked
    /// up by the broker when it talks to the token endpoint. Only with
    /// `client_id`.
    pub client_secret: Option<SecretSpec>,
}

impl RemoteConfig {
    /// What `status` shows.
    pub fn status(&self) -> RemoteStatus {
        RemoteStatus {
            url: self.url.clone(),
            headers: self
                .headers
                .iter()
                .map(|h| RemoteHeader {
                    name: h.name.clone(),
                    secret: match &h.value {
                        HeaderValueSpec::Secret(s) => Some(s.clone()),
                        HeaderValueSpec::Literal(_) => None,
                    },
                })
                .collect(),
            auth: if self.auth.is_some() { "oauth" } else { "none" }.to_owned(),
            scopes: self
                .auth
                .as_ref()
                .map(|a| a.scopes.clone())
                .unwrap_or_default(),
            client_id: self.auth.as_ref().and_then(|a| a.client_id.clone()),
        }
    }
}
