//! The seam between a remote server's upstream (SPEC §23: the gateway and
//! the server's own port forwarding to its `url`) and whatever supplies its
//! credentials: static `headers { … }` from §16 secrets, or the OAuth
//! broker's one grant per server. The upstream asks for headers before
//! each request and reports a rejection; the supplier refreshes (once, for
//! every caller at the same time) and the upstream retries once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hyper::HeaderMap;
use hyper::header::HeaderValue;

/// A boxed future, so the trait stays object-safe.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Supplies one remote server's upstream credentials.
pub(crate) trait Credentials: Send + Sync + 'static {
    /// Headers to add to the next upstream request (e.g. `Authorization`).
    /// Never logged; the caller adds them and drops them.
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>>;

    /// The upstream answered `401`, or `403` with `insufficient_scope`,
    /// carrying this `WWW-Authenticate` value, to a request that carried
    /// `sent` as its `Authorization`. `Ok(())`: fresh credentials are
    /// ready; the caller retries once with [`headers`](Self::headers).
    /// Concurrent callers share one refresh.
    fn rejected(
        &self,
        status: u16,
        www_authenticate: Option<String>,
        sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>>;

    /// The retry after [`rejected`](Self::rejected) was rejected as well.
    /// `Err`: the credentials cannot work (the client and `status` are
    /// told why); `Ok(())`: the upstream's answer goes to the client as
    /// it is.
    fn rejected_again(
        &self,
        _status: u16,
        _www_authenticate: Option<String>,
        _sent: Option<HeaderValue>,
    ) -> BoxFuture<'_, Result<(), CredentialError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Why no credentials can be had. The message is safe to show a client
/// and a log: it never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CredentialError {
    /// No grant, or the refresh was refused: only the user can fix it.
    #[error("login needed: xyctl auth login {server}{}", bracketed(.reason))]
    LoginNeeded {
        /// The server's name.
        server: String,
        /// Why, when there is more to say than that there is no grant (a
        /// refused refresh, the scopes the server asked for); shown in
        /// brackets after the hint.
        reason: Option<String>,
    },
    /// A secret lookup, the authorization server or the network failed;
    /// the message says which, without values.
    #[error("{0}")]
    Unavailable(String),
}

/// ` (<reason>)`, or nothing.
fn bracketed(reason: &Option<String>) -> String {
    reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

/// Makes the credentials supplier for a remote server; the daemon wires
/// the OAuth broker in here. `None`: the server sends no credentials.
pub(crate) type CredentialsFor =
    Arc<dyn Fn(&xy_core::config::ServerConfig) -> Option<Arc<dyn Credentials>> + Send + Sync>;
