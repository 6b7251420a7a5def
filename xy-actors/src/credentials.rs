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

/// A boxed future, so the trait stays object-safe.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Supplies one remote server's upstream credentials.
pub(crate) trait Credentials: Send + Sync + 'static {
    /// Headers to add to the next upstream request (e.g. `Authorization`).
    /// Never logged; the caller adds them and drops them.
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, CredentialError>>;

    /// The upstream answered `401`, or `403` with `insufficient_scope`,
    /// carrying this `WWW-Authenticate` value. `Ok(())`: fresh credentials
    /// are ready; the caller retries once with [`headers`](Self::headers).
    /// Concurrent callers share one refresh.
    fn rejected(
        &self,
        status: u16,
        www_authenticate: Option<String>,
    ) -> BoxFuture<'_, Result<(), CredentialError>>;
}

/// Why no credentials can be had. The message is safe to show a client
/// and a log: it never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CredentialError {
    /// No grant, or the refresh was refused: only the user can fix it.
    #[error("login needed: xyctl auth login {server}")]
    LoginNeeded {
        /// The server's name.
        server: String,
    },
    /// A secret lookup, the authorization server or the network failed;
    /// the message says which, without values.
    #[error("{0}")]
    Unavailable(String),
}

/// Makes the credentials supplier for a remote server; the daemon wires
/// the OAuth broker in here. `None`: the server sends no credentials.
pub(crate) type CredentialsFor =
    Arc<dyn Fn(&xy_core::config::ServerConfig) -> Option<Arc<dyn Credentials>> + Send + Sync>;
