//! `status.remote` (SPEC §23): what `status` shows of a remote server's
//! config — where it is and how xy authenticates to it, never a value.

use serde::{Deserialize, Serialize};

/// `status.remote` (SPEC §23): where the server is and how xy
/// authenticates to it — header names and secret names, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteStatus {
    /// The upstream `url`.
    pub url: String,
    /// `headers { }`, in file order.
    pub headers: Vec<RemoteHeader>,
    /// `"oauth"` with `auth { oauth }`, else `"none"`.
    pub auth: String,
    /// `auth { scopes … }` (empty without).
    pub scopes: Vec<String>,
    /// `auth { client-id … }`, else `null`.
    pub client_id: Option<String>,
}

/// One configured header as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteHeader {
    /// The header's name.
    pub name: String,
    /// The §16 secret its value comes from; `null` for a literal (whose
    /// value is not shown either).
    pub secret: Option<String>,
}
